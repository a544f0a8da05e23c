package islandbench

import (
	"slices"
	"testing"
)

func TestTurns(t *testing.T) {
	for _, c := range []struct {
		n, t int
		want []int
	}{
		{2, 0, []int{0, 1}},
		{2, 3, []int{1, 0}},
		{1, 1, []int{0}},
		{3, 0, []int{0, 1, 2}},
		{3, 1, []int{2, 1, 0}},
		{3, 4, []int{0, 1, 2}},
	} {
		if got := Turns(c.n, c.t); !slices.Equal(got, c.want) {
			t.Errorf("Turns(%d, %d) = %v, want %v", c.n, c.t, got, c.want)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{7}, 7},
	} {
		in := slices.Clone(c.xs)
		if got := Median(c.xs); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", in, got, c.want)
		}
		if !slices.Equal(in, c.xs) {
			t.Errorf("Median changed its argument: %v, was %v", c.xs, in)
		}
	}
}
