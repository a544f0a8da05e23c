package strategy

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
)

// specDiff describes how two values of the same struct type differ, one
// line per changed top-level field ("-" old, "+" new, as JSON). Kubernetes
// appends a go-cmp diff to some immutability errors; this is its plain
// stand-in.
func specDiff(old, cur any) string {
	ov, nv := reflect.ValueOf(old), reflect.ValueOf(cur)
	if ov.Kind() != reflect.Struct || ov.Type() != nv.Type() {
		return ""
	}
	var b strings.Builder
	for i := 0; i < ov.NumField(); i++ {
		f := ov.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		a, c := ov.Field(i).Interface(), nv.Field(i).Interface()
		if equality.Semantic.DeepEqual(a, c) {
			continue
		}
		name := strings.Split(f.Tag.Get("json"), ",")[0]
		if name == "" {
			name = f.Name
		}
		fmt.Fprintf(&b, "-  %s: %s\n+  %s: %s\n", name, toJSON(a), name, toJSON(c))
	}
	return b.String()
}

func toJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return string(b)
}

// parseInt32 parses a decimal 32-bit integer.
func parseInt32(s string) (int32, error) {
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("parse int32 %q: %w", s, err)
	}
	return int32(v), nil
}
