package registry

// withoutManagedFields is stored JSON without metadata.managedFields, a
// copy (data is the store's), or data itself if it has none or is not the
// compact JSON the store writes. A Table has no use for them, and they are
// often half of an object's bytes and most of its decoding.
func withoutManagedFields(data []byte) []byte {
	meta := -1
	eachMember(data, 0, func(k []byte, _, vs, _ int) bool {
		if string(k) == "metadata" {
			meta = vs
			return false
		}
		return true
	})
	if meta < 0 {
		return data
	}
	from, to, ok := memberSpan(data, meta, "managedFields")
	if !ok {
		return data
	}
	out := make([]byte, 0, len(data)-(to-from))
	out = append(out, data[:from]...)
	return append(out, data[to:]...)
}

// memberSpan finds the member key (its name, value and one comma beside
// it) in the object that starts at data[i], to cut it out.
func memberSpan(data []byte, i int, key string) (from, to int, ok bool) {
	found := false
	compact := eachMember(data, i, func(k []byte, ks, _, ve int) bool {
		if string(k) != key {
			return true
		}
		found = true
		switch {
		case data[ve] == ',':
			from, to = ks, ve+1 // "k":v,
		case data[ks-1] == ',':
			from, to = ks-1, ve // ,"k":v
		default:
			from, to = ks, ve // the only member
		}
		return false
	})
	return from, to, compact && found
}

// eachMember calls fn with each member of the compact JSON object that
// starts at data[i]: its key, where the key starts, and where its value
// starts and ends, until fn returns false. It reports false if the object
// is not compact JSON as the store writes it (fn may have been called).
func eachMember(data []byte, i int, fn func(key []byte, ks, vs, ve int) bool) bool {
	if i >= len(data) || data[i] != '{' {
		return false
	}
	i++
	if i < len(data) && data[i] == '}' {
		return true
	}
	for i < len(data) {
		ks := i
		if data[i] != '"' {
			return false
		}
		ke := skipString(data, i)
		if ke >= len(data) || data[ke] != ':' {
			return false
		}
		vs := ke + 1
		ve := skipValue(data, vs)
		if ve >= len(data) || vs == ve {
			return false
		}
		if !fn(data[ks+1:ke-1], ks, vs, ve) {
			return true
		}
		switch data[ve] {
		case ',':
			i = ve + 1
		case '}':
			return true
		default:
			return false
		}
	}
	return false
}

// skipString is the index just past the string that starts at data[i].
func skipString(data []byte, i int) int {
	for i++; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(data)
}

// skipValue is the index just past the value that starts at data[i].
func skipValue(data []byte, i int) int {
	if i >= len(data) {
		return i
	}
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for i < len(data) {
			switch data[i] {
			case '"':
				i = skipString(data, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(data)
	}
	for i < len(data) && data[i] != ',' && data[i] != '}' && data[i] != ']' {
		i++
	}
	return i
}
