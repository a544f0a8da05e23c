package registry

// StoredDictV1 is the dictionary of stored values, for its test.
func StoredDictV1() []byte { return storedDictV1 }
