package islandbench

import "slices"

// Turns is the order of n measured paths in trial t: forwards, then
// backwards, so that noise (and the first run's warm-up) hits all alike.
func Turns(n, t int) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = i
		if t%2 == 1 {
			order[i] = n - 1 - i
		}
	}
	return order
}

// Median is the middle of xs (the mean of the two middle ones for an even
// count); xs is not changed. It panics on an empty xs.
func Median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
