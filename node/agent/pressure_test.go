package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/hw"
	"github.com/isle-cluster/isle/hw/led"
	"github.com/isle-cluster/isle/node/gossip"
)

func TestPressureOf(t *testing.T) {
	const gib = 1 << 30
	pi3Threshold := int64(gib * 5 / 100) // 51.2 MiB: 5% of 1 GiB is below 100 MiB
	for _, tc := range []struct {
		name      string
		r         reading
		threshold int64
		want      pressure
	}{
		{"healthy", healthy(gib), pi3Threshold, pressure{}},
		{"1 GiB board, 60 MiB free", with(healthy(gib), func(r *reading) { r.memoryAvailable = 60 << 20 }), pi3Threshold, pressure{}},
		{"1 GiB board, 50 MiB free", with(healthy(gib), func(r *reading) { r.memoryAvailable = 50 << 20 }), pi3Threshold, pressure{memory: true}},
		{"8 GiB board, 100 MiB free", with(healthy(8*gib), func(r *reading) { r.memoryAvailable = 100 << 20 }), 100 << 20, pressure{}},
		{"8 GiB board, 99 MiB free", with(healthy(8*gib), func(r *reading) { r.memoryAvailable = 99 << 20 }), 100 << 20, pressure{memory: true}},
		{"disk 10% free", with(healthy(gib), func(r *reading) { r.disk = hw.Filesystem{Size: 1000, Available: 100} }), pi3Threshold, pressure{}},
		{"disk 9.9% free", with(healthy(gib), func(r *reading) { r.disk = hw.Filesystem{Size: 1000, Available: 99} }), pi3Threshold, pressure{disk: true}},
		{"disk full", with(healthy(gib), func(r *reading) { r.disk = hw.Filesystem{Size: 1000} }), pi3Threshold, pressure{disk: true}},
		// 90% of 32768 is 29491.2.
		{"PIDs 90% taken", with(healthy(gib), func(r *reading) { r.pids = hw.PIDs{Used: 29491, Max: 32768} }), pi3Threshold, pressure{}},
		{"PIDs over 90% taken", with(healthy(gib), func(r *reading) { r.pids = hw.PIDs{Used: 29492, Max: 32768} }), pi3Threshold, pressure{pids: true}},
		{"everything short", reading{memoryAvailable: 0, disk: hw.Filesystem{Size: 10}, pids: hw.PIDs{Used: 100, Max: 100}}, pi3Threshold,
			pressure{memory: true, disk: true, pids: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := pressureOf(tc.r, tc.threshold); got != tc.want {
				t.Fatalf("%+v, want %+v", got, tc.want)
			}
		})
	}
}

func with(r reading, edit func(*reading)) reading {
	edit(&r)
	return r
}

func TestPressureConditions(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cs := pressure{disk: true}.conditions(now)
	want := map[corev1.NodeConditionType]struct {
		status corev1.ConditionStatus
		reason string
	}{
		corev1.NodeMemoryPressure: {corev1.ConditionFalse, "KubeletHasSufficientMemory"},
		corev1.NodeDiskPressure:   {corev1.ConditionTrue, "KubeletHasDiskPressure"},
		corev1.NodePIDPressure:    {corev1.ConditionFalse, "KubeletHasSufficientPID"},
		corev1.NodeReady:          {corev1.ConditionTrue, readyReason},
	}
	if len(cs) != len(want) {
		t.Fatalf("conditions %v", cs)
	}
	for _, c := range cs {
		w, ok := want[c.Type]
		if !ok || c.Status != w.status || c.Reason != w.reason || c.Message == "" || !c.LastTransitionTime.Time.Equal(now) {
			t.Errorf("condition %+v, want %+v", c, w)
		}
	}
}

// fakeAPI serves one Node as the API server does, enough for the agent:
// get, update and update status, with resource versions.
type fakeAPI struct {
	t  *testing.T
	mu sync.Mutex
	// node is the stored Node; its resource version counts the writes.
	node       corev1.Node
	gets       int
	statusPuts int
	// conflicts is how many next status updates fail with 409.
	conflicts int
	// events are the Events posted.
	events []corev1.Event
	// patches counts the merge patches of the Node's annotations taken;
	// failPatches is how many next ones fail with 500.
	patches, failPatches int
}

func newFakeAPI(t *testing.T, n corev1.Node) (*fakeAPI, *rest.RESTClient) {
	f := &fakeAPI{t: t, node: n}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	metav1.AddToGroupVersion(scheme, corev1.SchemeGroupVersion)
	c, err := rest.RESTClientFor(&rest.Config{Host: srv.URL, APIPath: "/api", QPS: -1, ContentConfig: rest.ContentConfig{
		GroupVersion:         &corev1.SchemeGroupVersion,
		NegotiatedSerializer: serializer.NewCodecFactory(scheme).WithoutConversion(),
	}})
	if err != nil {
		t.Fatal(err)
	}
	return f, c
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	reply := func(code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		if err := json.NewEncoder(w).Encode(v); err != nil {
			f.t.Errorf("fake API: %v", err)
		}
	}
	fail := func(code int, reason metav1.StatusReason) {
		reply(code, metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
			Reason: reason, Code: int32(code), Message: string(reason)})
	}
	path := "/api/v1/nodes/" + f.node.Name
	switch {
	case r.Method == http.MethodGet && r.URL.Path == path:
		f.gets++
		f.node.TypeMeta = metav1.TypeMeta{Kind: "Node", APIVersion: "v1"}
		reply(http.StatusOK, f.node)
	case r.Method == http.MethodPut && (r.URL.Path == path || r.URL.Path == path+"/status"):
		var n corev1.Node
		if err := json.NewDecoder(r.Body).Decode(&n); err != nil {
			fail(http.StatusBadRequest, metav1.StatusReasonBadRequest)
			return
		}
		status := strings.HasSuffix(r.URL.Path, "/status")
		if n.ResourceVersion != f.node.ResourceVersion || (status && f.conflicts > 0) {
			f.conflicts--
			fail(http.StatusConflict, metav1.StatusReasonConflict)
			return
		}
		rv, _ := strconv.Atoi(f.node.ResourceVersion)
		if status {
			f.statusPuts++
			f.node.Status = n.Status
		} else {
			f.node.Labels, f.node.Annotations = n.Labels, n.Annotations
		}
		f.node.ResourceVersion = strconv.Itoa(rv + 1)
		reply(http.StatusOK, f.node)
	case r.Method == http.MethodPatch && r.URL.Path == path && r.Header.Get("Content-Type") == string(types.MergePatchType):
		if f.failPatches > 0 {
			f.failPatches--
			fail(http.StatusInternalServerError, metav1.StatusReasonInternalError)
			return
		}
		var p struct {
			Metadata struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		}
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			fail(http.StatusBadRequest, metav1.StatusReasonBadRequest)
			return
		}
		if f.node.Annotations == nil {
			f.node.Annotations = map[string]string{}
		}
		maps.Copy(f.node.Annotations, p.Metadata.Annotations)
		f.patches++
		rv, _ := strconv.Atoi(f.node.ResourceVersion)
		f.node.ResourceVersion = strconv.Itoa(rv + 1)
		reply(http.StatusOK, f.node)
	case r.Method == http.MethodPost && r.URL.Path == "/api/v1/namespaces/default/events":
		var ev corev1.Event
		if err := json.NewDecoder(r.Body).Decode(&ev); err != nil {
			fail(http.StatusBadRequest, metav1.StatusReasonBadRequest)
			return
		}
		f.events = append(f.events, ev)
		reply(http.StatusCreated, ev)
	default:
		f.t.Errorf("fake API: unexpected %s %s", r.Method, r.URL.Path)
		fail(http.StatusNotFound, metav1.StatusReasonNotFound)
	}
}

// counts are the Node reads and status writes so far.
func (f *fakeAPI) counts() (gets, statusPuts int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gets, f.statusPuts
}

func (f *fakeAPI) condition(typ corev1.NodeConditionType) corev1.NodeCondition {
	f.mu.Lock()
	defer f.mu.Unlock()
	if i := conditionIndex(f.node.Status.Conditions, typ); i >= 0 {
		return f.node.Status.Conditions[i]
	}
	f.t.Fatalf("the Node has no %s condition", typ)
	return corev1.NodeCondition{}
}

// pressureAgent is an agent of a 1 GiB board whose API is a fakeAPI and
// whose pressure reading is *now.
func pressureAgent(t *testing.T, logs io.Writer) (*Agent, *fakeAPI, *reading) {
	t.Helper()
	pi3 := hw.Facts{Arch: "arm", ARMVersion: 7, CPUs: 4, Memory: 1 << 30}
	api, client := newFakeAPI(t, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "pi3", ResourceVersion: "1"}})
	cfg := Config{Credential: wire.Credential{Name: "pi3"}, Role: gossip.RoleAgent, Address: "192.168.1.23", KubeVersion: "v1.32.4"}
	a := &Agent{cfg: cfg, log: slog.New(slog.NewTextHandler(logs, nil)), facts: pi3, client: client, report: testReport(t, cfg, pi3)}
	now := healthy(pi3.Memory)
	a.report.read = func() (reading, error) { return now, nil }
	return a, api, &now
}

// The agent writes the Node's status when a condition's status changes,
// and only then; a write that failed is made at the next check.
func TestCheckPressureWritesOnChange(t *testing.T) {
	ctx := t.Context()
	a, api, now := pressureAgent(t, io.Discard)
	if err := a.register(ctx); err != nil {
		t.Fatal(err)
	}
	gets0, puts := api.counts()
	if puts != 1 {
		t.Fatalf("registration wrote the status %d times", puts)
	}
	registered := api.condition(corev1.NodeMemoryPressure).LastTransitionTime
	check := func(what string, wantPuts int) {
		t.Helper()
		if err := a.checkPressure(ctx); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if _, puts := api.counts(); puts != wantPuts {
			t.Fatalf("%s: %d status writes, want %d", what, puts, wantPuts)
		}
	}

	for range 3 {
		check("no change", 1)
	}
	if gets, _ := api.counts(); gets != gets0 {
		t.Fatalf("checks with no change read the Node %d times", gets-gets0)
	}

	before := time.Now().Truncate(time.Second) // times go over the wire in seconds
	now.memoryAvailable = 40 << 20
	check("memory short", 2)
	mp := api.condition(corev1.NodeMemoryPressure)
	if mp.Status != corev1.ConditionTrue || mp.Reason != "KubeletHasInsufficientMemory" || mp.LastTransitionTime.Time.Before(before) {
		t.Fatalf("MemoryPressure %+v, want True since %v", mp, before)
	}
	if dp := api.condition(corev1.NodeDiskPressure); dp.Status != corev1.ConditionFalse || !dp.LastTransitionTime.Equal(&registered) {
		t.Fatalf("DiskPressure %+v changed with memory", dp)
	}
	now.memoryAvailable = 30 << 20 // still short: no change
	check("memory still short", 2)

	// The write conflicts (the Node changed meanwhile): the check reads
	// it again and writes. If it keeps conflicting, the next check writes.
	api.mu.Lock()
	api.conflicts = 1
	api.mu.Unlock()
	*now = healthy(1 << 30)
	check("a conflict", 3)
	if mp := api.condition(corev1.NodeMemoryPressure); mp.Status != corev1.ConditionFalse {
		t.Fatalf("MemoryPressure %+v after memory came back", mp)
	}
	api.mu.Lock()
	api.conflicts = maxStatusTries
	api.mu.Unlock()
	now.memoryAvailable = 40 << 20
	if err := a.checkPressure(ctx); err == nil {
		t.Fatal("a write that kept conflicting reported no error")
	}
	check("after conflicts", 4)
	now.memoryAvailable = 1 << 30
	check("memory back", 5)

	// The change was already written (by the agent's Ready follow-up):
	// the check reads the Node but writes nothing.
	now.disk.Available = 0
	if _, err := a.report.evaluate(); err != nil {
		t.Fatal(err)
	}
	n := api.node.DeepCopy() // no writer runs now
	if err := a.postStatus(ctx, n); err != nil {
		t.Fatal(err)
	}
	check("already written", 6)
	if dp := api.condition(corev1.NodeDiskPressure); dp.Status != corev1.ConditionTrue {
		t.Fatalf("DiskPressure %+v", dp)
	}
	gets1, _ := api.counts()
	check("no change after", 6)
	if gets, _ := api.counts(); gets != gets1 {
		t.Fatal("the pressure already written was not recorded as posted")
	}

	// A reading that fails keeps the last pressure.
	a.report.read = func() (reading, error) { return reading{}, errors.New("no /proc") }
	if err := a.checkPressure(ctx); err == nil || !strings.Contains(err.Error(), "no /proc") {
		t.Fatalf("a failed reading: %v", err)
	}
	if st := a.report.status(time.Now()); st.Conditions[conditionIndex(st.Conditions, corev1.NodeDiskPressure)].Status != corev1.ConditionTrue {
		t.Fatal("a failed reading cleared DiskPressure")
	}
}

// A Raspberry Pi's under-voltage and throttling become Node conditions,
// and each change of their reason an Event: Warning when it goes bad,
// Normal when it is over. A board that starts healthy says nothing.
func TestPowerConditions(t *testing.T) {
	ctx := t.Context()
	a, api, now := pressureAgent(t, io.Discard)
	ok := hw.Throttling{}.Conditions()
	now.power = ok
	if _, err := a.report.evaluate(); err != nil {
		t.Fatal(err)
	}
	a.report.posted = a.report.pressure
	if err := a.register(ctx); err != nil {
		t.Fatal(err)
	}
	if uv := api.condition("UnderVoltage"); uv.Status != corev1.ConditionFalse || uv.Reason != "SupplyVoltageOK" {
		t.Fatalf("UnderVoltage at start: %+v", uv)
	}
	if th := api.condition("Throttled"); th.Status != corev1.ConditionFalse {
		t.Fatalf("Throttled at start: %+v", th)
	}
	events := func() []string {
		api.mu.Lock()
		defer api.mu.Unlock()
		var out []string
		for _, e := range api.events {
			if e.InvolvedObject.Kind != "Node" || e.InvolvedObject.Name != "pi3" {
				t.Errorf("event about %+v", e.InvolvedObject)
			}
			out = append(out, e.Type+" "+e.Reason)
		}
		return out
	}
	if ev := events(); len(ev) != 0 {
		t.Fatalf("events of a healthy start: %v", ev)
	}

	now.power = hw.Throttling{UnderVoltage: true, UnderVoltageOccurred: true, Throttled: true, ThrottledOccurred: true, Raw: 0x50005}.Conditions()
	if err := a.checkPressure(ctx); err != nil {
		t.Fatal(err)
	}
	uv := api.condition("UnderVoltage")
	if uv.Status != corev1.ConditionTrue || !strings.Contains(uv.Message, "0x50005") {
		t.Fatalf("UnderVoltage: %+v", uv)
	}
	if ev := strings.Join(events(), ", "); ev != "Warning UnderVoltage, Warning Throttled" {
		t.Fatalf("events when the supply sags: %s", ev)
	}
	// Over now, but it happened since boot: the reasons change again.
	now.power = hw.Throttling{UnderVoltageOccurred: true, ThrottledOccurred: true, Raw: 0x50000}.Conditions()
	if err := a.checkPressure(ctx); err != nil {
		t.Fatal(err)
	}
	if uv := api.condition("UnderVoltage"); uv.Status != corev1.ConditionFalse || uv.Reason != "UnderVoltageSinceBoot" {
		t.Fatalf("UnderVoltage after: %+v", uv)
	}
	if ev := events(); len(ev) != 4 || ev[2] != "Normal UnderVoltageSinceBoot" || ev[3] != "Normal ThrottledSinceBoot" {
		t.Fatalf("events when the supply is fine again: %v", ev)
	}
	if err := a.checkPressure(ctx); err != nil {
		t.Fatal(err)
	}
	if ev := events(); len(ev) != 4 {
		t.Fatalf("events with no change: %v", ev)
	}
}

// The loop checks at every tick, logs a failing check once, and says when
// it works again.
func TestPressureLoop(t *testing.T) {
	var logs bytes.Buffer // written by the loop between ticks only
	a, api, now := pressureAgent(t, &logs)
	if err := a.register(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Each check reads the next of these; ticks and readings go over
	// unbuffered channels, so a tick's send returns once the loop is
	// waiting again, the previous check done.
	type result struct {
		r   reading
		err error
	}
	results := make(chan result)
	ctx, cancel := context.WithCancel(t.Context())
	a.report.read = func() (reading, error) {
		select {
		case res := <-results:
			return res.r, res.err
		case <-ctx.Done():
			return reading{}, ctx.Err()
		}
	}
	tick := make(chan time.Time)
	done := make(chan struct{})
	go func() {
		a.pressureLoop(ctx, tick)
		close(done)
	}()
	step := func(r reading, err error) {
		tick <- time.Now()
		results <- result{r, err}
	}

	short := *now
	short.pids.Used = short.pids.Max
	step(short, nil)
	tick <- time.Now() // the first check is done
	if _, puts := api.counts(); puts != 2 {
		t.Fatalf("%d status writes, want registration's and one for PIDPressure", puts)
	}
	results <- result{short, nil}
	for range 3 {
		step(reading{}, errors.New("no /proc"))
	}
	step(short, nil)
	tick <- time.Now() // the last check is done; the next one ends with ctx
	cancel()
	<-done
	if n := strings.Count(logs.String(), "pressure not checked"); n != 1 {
		t.Errorf("a failing check logged %d times, want once:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "pressure checked again") {
		t.Errorf("recovery not logged:\n%s", logs.String())
	}
	if c := api.condition(corev1.NodePIDPressure); c.Status != corev1.ConditionTrue {
		t.Errorf("PIDPressure %+v", c)
	}
}

// When containerd stops answering, the Node turns NotReady and the
// readiness LED blinks fast; when it answers again, both come back.
func TestWatchRuntime(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	a, api, _ := pressureAgent(t, io.Discard)
	ready := &led.Virtual{}
	a.cfg.LEDs = led.NewBoard(ready, nil, nil, slog.New(slog.DiscardHandler))
	defer a.cfg.LEDs.Close()
	a.cfg.LEDs.SetReadiness(led.Ready)
	if err := a.register(ctx); err != nil {
		t.Fatal(err)
	}
	var serving atomic.Bool
	serving.Store(true)
	tick := make(chan time.Time)
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.watchRuntime(ctx, func(context.Context) bool { return serving.Load() }, tick)
	}()
	step := func(up bool) {
		serving.Store(up)
		tick <- time.Now()
		tick <- time.Now() // the first tick's work is done when the loop takes the second
	}
	step(true)
	if _, puts := api.counts(); puts != 1 {
		t.Fatalf("status writes while containerd answers: %d, want the registration's only", puts)
	}
	step(false)
	if r := api.condition(corev1.NodeReady); r.Status != corev1.ConditionFalse || r.Reason != "KubeletNotReady" ||
		!strings.Contains(r.Message, "container runtime is down") {
		t.Fatalf("Ready with containerd down: %+v", r)
	}
	if st := a.cfg.LEDs.State(); st.Readiness != led.NotReady {
		t.Fatalf("readiness LED with containerd down: %v", st.Readiness)
	}
	step(true)
	if r := api.condition(corev1.NodeReady); r.Status != corev1.ConditionTrue || r.Reason != readyReason {
		t.Fatalf("Ready after containerd came back: %+v", r)
	}
	if st := a.cfg.LEDs.State(); st.Readiness != led.Ready {
		t.Fatalf("readiness LED after containerd came back: %v", st.Readiness)
	}
	if _, puts := api.counts(); puts != 3 {
		t.Fatalf("status writes: %d, want registration, NotReady and Ready", puts)
	}
	cancel()
	<-done
}

// A board whose memory cgroup is off registers NotReady saying why and how
// to fix it, and stays so at every check.
func TestBlockedBoardNotReady(t *testing.T) {
	a, api, _ := pressureAgent(t, io.Discard)
	const why = "memory cgroup disabled (cgroup_disable=memory on the kernel command line); pods' memory limits need it"
	a.report.blocked = why
	if _, err := a.report.evaluate(); err != nil {
		t.Fatal(err)
	}
	if err := a.register(t.Context()); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		r := api.condition(corev1.NodeReady)
		if r.Status != corev1.ConditionFalse || r.Reason != notReadyReason || r.Message != "the board cannot run pods: "+why {
			t.Fatalf("Ready %s: %+v, want False saying why", when, r)
		}
	}
	check("at registration")
	for range 3 {
		if err := a.checkPressure(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	check("after checks")
	if _, puts := api.counts(); puts != 1 {
		t.Errorf("status writes: %d, want the registration's only", puts)
	}
}
