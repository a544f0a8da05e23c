package kv

import (
	"fmt"
	"hash/fnv"

	"github.com/anishathalye/porcupine"
)

// ModelOp is an operation of the linearizability model.
type ModelOp uint8

// Model operations.
const (
	// ModelGet reads Key. Output: Found and Value.
	ModelGet ModelOp = iota + 1
	// ModelPut writes Value to Key unconditionally.
	ModelPut
	// ModelDelete removes Key (no error if absent).
	ModelDelete
	// ModelCAS writes Value to Key if the key exists with value Old.
	// Output: OK reports whether it did.
	ModelCAS
)

// ModelInput is the input of one operation in a porcupine history
// (porcupine.Operation.Input or the Value of a call Event). Use the value
// type, not a pointer.
type ModelInput struct {
	Op    ModelOp
	Key   string
	Value string // put, cas: the new value
	Old   string // cas: the expected current value
}

// ModelOutput is the observed result of one operation (Operation.Output or
// the Value of a return Event). Use the value type, not a pointer.
type ModelOutput struct {
	Found bool   // get: the key existed
	Value string // get: its value
	OK    bool   // cas: the swap happened
	// Unknown marks an operation whose outcome the client never learned
	// (timeout, lost connection): any outcome is accepted. Give such an
	// operation a Return time after every other operation of the history,
	// so that it may also be linearized as never having taken effect.
	Unknown bool
}

// modelState is the state of one key (one partition).
type modelState struct {
	exists bool
	value  string
}

// PorcupineModel returns a porcupine model of one register per key: every
// key is an independent partition, initially absent. Inputs must be
// ModelInput and outputs ModelOutput; any other type makes the step fail.
func PorcupineModel() porcupine.Model {
	return porcupine.Model{
		Partition:         partitionOperations,
		PartitionEvent:    partitionEvents,
		Init:              func() any { return modelState{} },
		Step:              modelStep,
		Equal:             func(a, b any) bool { return a.(modelState) == b.(modelState) },
		Hash:              modelHash,
		DescribeOperation: describeModelOperation,
		DescribeState:     describeModelState,
	}
}

func modelStep(state, input, output any) (bool, any) {
	st, ok1 := state.(modelState)
	in, ok2 := input.(ModelInput)
	out, ok3 := output.(ModelOutput)
	if !ok1 || !ok2 || !ok3 {
		return false, state
	}
	switch in.Op {
	case ModelGet:
		if out.Unknown {
			return true, st
		}
		return out.Found == st.exists && (!st.exists || out.Value == st.value), st
	case ModelPut:
		return true, modelState{exists: true, value: in.Value}
	case ModelDelete:
		return true, modelState{}
	case ModelCAS:
		match := st.exists && st.value == in.Old
		if !out.Unknown && out.OK != match {
			return false, st
		}
		if match {
			return true, modelState{exists: true, value: in.Value}
		}
		return true, st
	}
	return false, st
}

func modelHash(state any) uint64 {
	st, _ := state.(modelState)
	h := fnv.New64a()
	if st.exists {
		h.Write([]byte{1})
		h.Write([]byte(st.value))
	}
	return h.Sum64()
}

// partitionOperations groups operations by key, partitions ordered by the
// first appearance of their key, operations keeping their order.
func partitionOperations(history []porcupine.Operation) [][]porcupine.Operation {
	index := make(map[string]int)
	var parts [][]porcupine.Operation
	for _, op := range history {
		key := inputKey(op.Input)
		i, ok := index[key]
		if !ok {
			i = len(parts)
			index[key] = i
			parts = append(parts, nil)
		}
		parts[i] = append(parts[i], op)
	}
	return parts
}

// partitionEvents groups events by the key of their call; a return event
// goes with the call of the same Id.
func partitionEvents(history []porcupine.Event) [][]porcupine.Event {
	index := make(map[string]int)
	keyOfID := make(map[int]string)
	var parts [][]porcupine.Event
	for _, ev := range history {
		var key string
		if ev.Kind == porcupine.CallEvent {
			key = inputKey(ev.Value)
			keyOfID[ev.Id] = key
		} else {
			key = keyOfID[ev.Id]
		}
		i, ok := index[key]
		if !ok {
			i = len(parts)
			index[key] = i
			parts = append(parts, nil)
		}
		parts[i] = append(parts[i], ev)
	}
	return parts
}

func inputKey(input any) string {
	if in, ok := input.(ModelInput); ok {
		return in.Key
	}
	return ""
}

func describeModelOperation(input, output any) string {
	in, _ := input.(ModelInput)
	out, _ := output.(ModelOutput)
	var res string
	switch in.Op {
	case ModelGet:
		switch {
		case out.Unknown:
			res = "?"
		case out.Found:
			res = fmt.Sprintf("%q", out.Value)
		default:
			res = "absent"
		}
		return fmt.Sprintf("get(%q) -> %s", in.Key, res)
	case ModelPut:
		return fmt.Sprintf("put(%q, %q)%s", in.Key, in.Value, unknownSuffix(out))
	case ModelDelete:
		return fmt.Sprintf("delete(%q)%s", in.Key, unknownSuffix(out))
	case ModelCAS:
		res = fmt.Sprintf("%t", out.OK)
		if out.Unknown {
			res = "?"
		}
		return fmt.Sprintf("cas(%q, %q, %q) -> %s", in.Key, in.Old, in.Value, res)
	}
	return fmt.Sprintf("invalid(%v) -> %v", input, output)
}

func unknownSuffix(out ModelOutput) string {
	if out.Unknown {
		return " -> ?"
	}
	return ""
}

func describeModelState(state any) string {
	st, _ := state.(modelState)
	if !st.exists {
		return "absent"
	}
	return fmt.Sprintf("%q", st.value)
}
