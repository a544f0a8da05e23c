package history

import "testing"

// A revision written before templates carried a null creation time is
// the same revision as the one written now, so an upgrade rolls no pods;
// other differences still count.
func TestSameJSON(t *testing.T) {
	before := `{"spec":{"template":{"$patch":"replace","metadata":{"labels":{"app":"a"}},"spec":{}}}}`
	now := `{"spec":{"template":{"$patch":"replace","metadata":{"creationTimestamp":null,"labels":{"app":"a"}},"spec":{}}}}`
	other := `{"spec":{"template":{"$patch":"replace","metadata":{"creationTimestamp":null,"labels":{"app":"b"}},"spec":{}}}}`
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{before, now, true},
		{now, now, true},
		{before, other, false},
		{`[1]`, `[1]`, true},
		{`[1]`, now, false},
	} {
		if got := sameJSON([]byte(c.a), []byte(c.b)); got != c.want {
			t.Errorf("sameJSON(%s, %s) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
