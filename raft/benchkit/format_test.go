package benchkit

import "testing"

func TestGroup(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want string
	}{
		{0, "0"},
		{0.49, "0"},
		{999.5, "1,000"},
		{12345, "12,345"},
		{1234567.2, "1,234,567"},
	} {
		if got := Group(tc.in); got != tc.want {
			t.Errorf("Group(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
