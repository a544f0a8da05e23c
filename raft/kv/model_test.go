package kv

import (
	"math"
	"testing"

	"github.com/anishathalye/porcupine"
)

func opGet(client int, call, ret int64, key string, found bool, value string) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: ModelInput{Op: ModelGet, Key: key}, Call: call, Output: ModelOutput{Found: found, Value: value}, Return: ret}
}

func opPut(client int, call, ret int64, key, value string) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: ModelInput{Op: ModelPut, Key: key, Value: value}, Call: call, Output: ModelOutput{}, Return: ret}
}

func opDel(client int, call, ret int64, key string) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: ModelInput{Op: ModelDelete, Key: key}, Call: call, Output: ModelOutput{}, Return: ret}
}

func opCAS(client int, call, ret int64, key, old, value string, ok bool) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: ModelInput{Op: ModelCAS, Key: key, Old: old, Value: value}, Call: call, Output: ModelOutput{OK: ok}, Return: ret}
}

func unknown(op porcupine.Operation) porcupine.Operation {
	op.Output = ModelOutput{Unknown: true}
	op.Return = math.MaxInt64
	return op
}

func TestPorcupineModel(t *testing.T) {
	tests := []struct {
		name    string
		history []porcupine.Operation
		want    bool
	}{
		{name: "empty", history: nil, want: true},
		{name: "get of absent key", history: []porcupine.Operation{opGet(0, 0, 1, "x", false, "")}, want: true},
		{name: "get of absent key reports a value", history: []porcupine.Operation{opGet(0, 0, 1, "x", true, "")}, want: false},
		{name: "sequential put then get", history: []porcupine.Operation{
			opPut(0, 0, 1, "x", "1"), opGet(0, 2, 3, "x", true, "1"),
		}, want: true},
		{name: "stale read after completed put", history: []porcupine.Operation{
			opPut(0, 0, 1, "x", "1"), opPut(0, 2, 3, "x", "2"), opGet(1, 4, 5, "x", true, "1"),
		}, want: false},
		{name: "read concurrent with put sees old", history: []porcupine.Operation{
			opPut(0, 0, 1, "x", "1"), opPut(0, 2, 5, "x", "2"), opGet(1, 3, 4, "x", true, "1"),
		}, want: true},
		{name: "read concurrent with put sees new", history: []porcupine.Operation{
			opPut(0, 0, 1, "x", "1"), opPut(0, 2, 5, "x", "2"), opGet(1, 3, 4, "x", true, "2"),
		}, want: true},
		{name: "new then old read while put in flight", history: []porcupine.Operation{
			opPut(0, 0, 1, "x", "1"), opPut(0, 2, 10, "x", "2"),
			opGet(1, 3, 4, "x", true, "2"), opGet(2, 5, 6, "x", true, "1"),
		}, want: false},
		{name: "value never written", history: []porcupine.Operation{
			opPut(0, 0, 1, "x", "1"), opGet(1, 2, 3, "x", true, "7"),
		}, want: false},
		{name: "delete then get absent", history: []porcupine.Operation{
			opPut(0, 0, 1, "x", "1"), opDel(0, 2, 3, "x"), opGet(1, 4, 5, "x", false, ""),
		}, want: true},
		{name: "get after delete sees value", history: []porcupine.Operation{
			opPut(0, 0, 1, "x", "1"), opDel(0, 2, 3, "x"), opGet(1, 4, 5, "x", true, "1"),
		}, want: false},
		{name: "cas succeeds on match", history: []porcupine.Operation{
			opPut(0, 0, 1, "x", "1"), opCAS(0, 2, 3, "x", "1", "2", true), opGet(0, 4, 5, "x", true, "2"),
		}, want: true},
		{name: "cas fails on mismatch", history: []porcupine.Operation{
			opPut(0, 0, 1, "x", "1"), opCAS(0, 2, 3, "x", "9", "2", false), opGet(0, 4, 5, "x", true, "1"),
		}, want: true},
		{name: "cas claims success on mismatch", history: []porcupine.Operation{
			opPut(0, 0, 1, "x", "1"), opCAS(0, 2, 3, "x", "9", "2", true),
		}, want: false},
		{name: "cas on absent key fails", history: []porcupine.Operation{
			opCAS(0, 0, 1, "x", "", "2", false), opGet(0, 2, 3, "x", false, ""),
		}, want: true},
		{name: "two concurrent cas from same value both succeed", history: []porcupine.Operation{
			opPut(0, 0, 1, "x", "0"),
			opCAS(1, 2, 5, "x", "0", "a", true), opCAS(2, 2, 5, "x", "0", "b", true),
		}, want: false},
		{name: "two concurrent cas, one wins", history: []porcupine.Operation{
			opPut(0, 0, 1, "x", "0"),
			opCAS(1, 2, 5, "x", "0", "a", true), opCAS(2, 2, 5, "x", "0", "b", false), opGet(0, 6, 7, "x", true, "a"),
		}, want: true},
		{name: "unknown put may have happened", history: []porcupine.Operation{
			opPut(0, 0, 1, "x", "1"), unknown(opPut(1, 2, 0, "x", "2")), opGet(0, 3, 4, "x", true, "2"),
		}, want: true},
		{name: "unknown put may not have happened", history: []porcupine.Operation{
			opPut(0, 0, 1, "x", "1"), unknown(opPut(1, 2, 0, "x", "2")), opGet(0, 3, 4, "x", true, "1"),
		}, want: true},
		{name: "unknown cas may not have happened", history: []porcupine.Operation{
			opPut(0, 0, 1, "x", "1"), unknown(opCAS(1, 2, 0, "x", "1", "2", false)), opGet(0, 3, 4, "x", true, "1"), opGet(0, 5, 6, "x", true, "2"),
		}, want: true},
		{name: "unknown put cannot explain an older value later", history: []porcupine.Operation{
			opPut(0, 0, 1, "x", "1"), unknown(opPut(1, 2, 0, "x", "2")), opGet(0, 3, 4, "x", true, "2"), opGet(0, 5, 6, "x", true, "1"),
		}, want: false},
		{name: "keys are independent", history: []porcupine.Operation{
			opPut(0, 0, 1, "x", "1"), opPut(1, 0, 1, "y", "2"),
			opGet(0, 2, 3, "y", true, "2"), opGet(1, 2, 3, "x", true, "1"),
		}, want: true},
		{name: "one bad key fails the history", history: []porcupine.Operation{
			opPut(0, 0, 1, "x", "1"), opPut(1, 0, 1, "y", "2"),
			opGet(0, 2, 3, "y", true, "2"), opGet(1, 2, 3, "x", false, ""),
		}, want: false},
		{name: "wrong input type", history: []porcupine.Operation{
			{Input: "get x", Output: ModelOutput{}, Call: 0, Return: 1},
		}, want: false},
	}
	model := PorcupineModel()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := porcupine.CheckOperations(model, tt.history); got != tt.want {
				t.Errorf("CheckOperations = %v, want %v", got, tt.want)
			}
			if got := porcupine.CheckEvents(model, toEvents(tt.history)); got != tt.want {
				t.Errorf("CheckEvents = %v, want %v", got, tt.want)
			}
		})
	}
}

// toEvents converts operations to the event form, ordering calls and
// returns by time (calls first on ties: intervals are closed).
func toEvents(ops []porcupine.Operation) []porcupine.Event {
	type point struct {
		t   int64
		ret bool
		id  int
		op  porcupine.Operation
	}
	var pts []point
	for i, op := range ops {
		pts = append(pts, point{t: op.Call, id: i, op: op}, point{t: op.Return, ret: true, id: i, op: op})
	}
	for i := 1; i < len(pts); i++ { // insertion sort: small and stable
		for j := i; j > 0; j-- {
			a, b := pts[j-1], pts[j]
			if a.t < b.t || (a.t == b.t && (!a.ret || b.ret)) {
				break
			}
			pts[j-1], pts[j] = b, a
		}
	}
	evs := make([]porcupine.Event, 0, len(pts))
	for _, p := range pts {
		if p.ret {
			evs = append(evs, porcupine.Event{ClientId: p.op.ClientId, Kind: porcupine.ReturnEvent, Value: p.op.Output, Id: p.id})
		} else {
			evs = append(evs, porcupine.Event{ClientId: p.op.ClientId, Kind: porcupine.CallEvent, Value: p.op.Input, Id: p.id})
		}
	}
	return evs
}

func TestPorcupineModelDescribe(t *testing.T) {
	model := PorcupineModel()
	tests := []struct {
		name string
		in   ModelInput
		out  ModelOutput
		want string
	}{
		{name: "get found", in: ModelInput{Op: ModelGet, Key: "k"}, out: ModelOutput{Found: true, Value: "v"}, want: `get("k") -> "v"`},
		{name: "get absent", in: ModelInput{Op: ModelGet, Key: "k"}, want: `get("k") -> absent`},
		{name: "put", in: ModelInput{Op: ModelPut, Key: "k", Value: "v"}, want: `put("k", "v")`},
		{name: "delete unknown", in: ModelInput{Op: ModelDelete, Key: "k"}, out: ModelOutput{Unknown: true}, want: `delete("k") -> ?`},
		{name: "cas", in: ModelInput{Op: ModelCAS, Key: "k", Old: "a", Value: "b"}, out: ModelOutput{OK: true}, want: `cas("k", "a", "b") -> true`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := model.DescribeOperation(tt.in, tt.out); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
	if got := model.DescribeState(modelState{exists: true, value: "v"}); got != `"v"` {
		t.Errorf("DescribeState = %s", got)
	}
}
