package volumes_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/isle-cluster/isle/control/controllers/internal/tabletest"
	"github.com/isle-cluster/isle/control/controllers/volumes"
	"github.com/isle-cluster/isle/control/registry"
)

// pvEnv is a store with every controller running and namespace "default".
type pvEnv struct {
	*tabletest.Env
	t                                     *testing.T
	pvs, pvcs, classes, nodes, pods, evts *registry.Resource
}

func newPVEnv(t *testing.T) *pvEnv {
	e := tabletest.New(t)
	e.Namespace(t, "default")
	return &pvEnv{Env: e, t: t,
		pvs: e.Res(t, "", "v1", "persistentvolumes"), pvcs: e.Res(t, "", "v1", "persistentvolumeclaims"),
		classes: e.Res(t, "storage.k8s.io", "v1", "storageclasses"), nodes: e.Res(t, "", "v1", "nodes"),
		pods: e.Res(t, "", "v1", "pods"), evts: e.Res(t, "", "v1", "events")}
}

const (
	rwo  = corev1.ReadWriteOnce
	rox  = corev1.ReadOnlyMany
	rwx  = corev1.ReadWriteMany
	rwop = corev1.ReadWriteOncePod
)

// testPV is a hostPath volume of the given size and modes, Retain, no
// class, changed by the options.
func testPV(name, size string, modes []corev1.PersistentVolumeAccessMode, opts ...func(*corev1.PersistentVolume)) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{
		Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
		AccessModes:                   modes,
		PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
		PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/srv/" + name}},
	}}
	for _, o := range opts {
		o(pv)
	}
	return pv
}

// testPVC is a claim in "default" of the given size and modes, of class
// (nil: none given, so the default class if there is one).
func testPVC(name, size string, modes []corev1.PersistentVolumeAccessMode, class *string, opts ...func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes:      modes,
		StorageClassName: class,
		Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
	}}
	for _, o := range opts {
		o(pvc)
	}
	return pvc
}

func modes(m ...corev1.PersistentVolumeAccessMode) []corev1.PersistentVolumeAccessMode { return m }

func class(name string) *string { return &name }

func pvClass(name string) func(*corev1.PersistentVolume) {
	return func(pv *corev1.PersistentVolume) { pv.Spec.StorageClassName = name }
}

func pvPolicy(p corev1.PersistentVolumeReclaimPolicy) func(*corev1.PersistentVolume) {
	return func(pv *corev1.PersistentVolume) { pv.Spec.PersistentVolumeReclaimPolicy = p }
}

func pvLabels(l map[string]string) func(*corev1.PersistentVolume) {
	return func(pv *corev1.PersistentVolume) { pv.Labels = l }
}

func pvOnNode(host string) func(*corev1.PersistentVolume) {
	return func(pv *corev1.PersistentVolume) {
		pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{host}}}}}}}
	}
}

func pvClaimRef(claim string) func(*corev1.PersistentVolume) {
	return func(pv *corev1.PersistentVolume) {
		pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "default", Name: claim}
	}
}

func (e *pvEnv) createPV(pv *corev1.PersistentVolume) *corev1.PersistentVolume {
	return e.MustCreate(e.t, e.pvs, "", pv).(*corev1.PersistentVolume)
}

func (e *pvEnv) createPVC(pvc *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
	return e.MustCreate(e.t, e.pvcs, "default", pvc).(*corev1.PersistentVolumeClaim)
}

func (e *pvEnv) createClass(sc *storagev1.StorageClass) {
	e.MustCreate(e.t, e.classes, "", sc)
}

// createNode makes a Node with a kubernetes.io/hostname label unlike its
// name, to tell the two apart.
func (e *pvEnv) createNode(name string) {
	e.MustCreate(e.t, e.nodes, "", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{corev1.LabelHostname: name + "-host"}}})
}

// createPod makes a pod that mounts the claims, on node; with node "" it
// waits for a node no scheduler finds (the tests play the scheduler).
func (e *pvEnv) createPod(name, node string, claims ...string) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	if node == "" {
		pod.Spec.NodeSelector = map[string]string{corev1.LabelHostname: "nowhere"}
	}
	for _, c := range claims {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: c,
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c}}})
	}
	e.MustCreate(e.t, e.pods, "default", pod)
}

func (e *pvEnv) getPV(name string) (*corev1.PersistentVolume, bool) {
	m, ok := e.Exists(e.t, e.pvs, "", name)
	if !ok {
		return nil, false
	}
	return m.(*corev1.PersistentVolume), true
}

func (e *pvEnv) getPVC(name string) (*corev1.PersistentVolumeClaim, bool) {
	m, ok := e.Exists(e.t, e.pvcs, "default", name)
	if !ok {
		return nil, false
	}
	return m.(*corev1.PersistentVolumeClaim), true
}

func (e *pvEnv) mustPV(name string) *corev1.PersistentVolume {
	e.t.Helper()
	pv, ok := e.getPV(name)
	if !ok {
		e.t.Fatalf("volume %s does not exist", name)
	}
	return pv
}

func (e *pvEnv) mustPVC(name string) *corev1.PersistentVolumeClaim {
	e.t.Helper()
	pvc, ok := e.getPVC(name)
	if !ok {
		e.t.Fatalf("claim %s does not exist", name)
	}
	return pvc
}

func (e *pvEnv) mutatePVC(name string, change func(*corev1.PersistentVolumeClaim)) {
	e.t.Helper()
	if _, err := e.Mutate(e.Ctx, e.pvcs, "default", name, "", func(o runtime.Object) error {
		change(o.(*corev1.PersistentVolumeClaim))
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *pvEnv) mutatePV(name string, change func(*corev1.PersistentVolume)) {
	e.t.Helper()
	if _, err := e.Mutate(e.Ctx, e.pvs, "", name, "", func(o runtime.Object) error {
		change(o.(*corev1.PersistentVolume))
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *pvEnv) deletePVC(name string) {
	e.t.Helper()
	if _, _, err := e.Delete(e.Ctx, e.pvcs, "default", name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// event waits for an Event about the object with the reason and returns
// it; the message must contain want.
func (e *pvEnv) event(kind, name, reason, want string) *corev1.Event {
	e.t.Helper()
	var found *corev1.Event
	var seen []string
	deadline := time.Now().Add(tabletest.Wait)
	for found == nil {
		if time.Now().After(deadline) {
			e.t.Fatalf("no %s event about %s %s with %q; events: %q", reason, kind, name, want, seen)
		}
		list, err := e.List(e.Ctx, e.evts, "default", metav1.ListOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
		seen = seen[:0]
		for i := range list.(*corev1.EventList).Items {
			ev := &list.(*corev1.EventList).Items[i]
			if ev.InvolvedObject.Kind != kind || ev.InvolvedObject.Name != name {
				continue
			}
			seen = append(seen, ev.Reason+": "+ev.Message)
			if ev.Reason == reason && strings.Contains(ev.Message, want) {
				found = ev
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return found
}

// waitAvailable waits for the volumes to be Available.
func (e *pvEnv) waitAvailable(volumes ...*corev1.PersistentVolume) {
	e.t.Helper()
	for _, v := range volumes {
		tabletest.Eventually(e.t, "volume "+v.Name+" is Available", func() bool {
			pv, ok := e.getPV(v.Name)
			return ok && pv.Status.Phase == corev1.VolumeAvailable
		})
	}
}

// waitBound waits for claim and volume to be bound to each other and
// checks the binding as kubectl shows it.
func (e *pvEnv) waitBound(claim, volume string) (*corev1.PersistentVolumeClaim, *corev1.PersistentVolume) {
	e.t.Helper()
	var pvc *corev1.PersistentVolumeClaim
	var pv *corev1.PersistentVolume
	tabletest.Eventually(e.t, "claim "+claim+" and volume "+volume+" are Bound to each other", func() bool {
		var ok1, ok2 bool
		pvc, ok1 = e.getPVC(claim)
		pv, ok2 = e.getPV(volume)
		return ok1 && ok2 && pvc.Status.Phase == corev1.ClaimBound && pvc.Spec.VolumeName == volume &&
			pv.Status.Phase == corev1.VolumeBound && pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.UID == pvc.UID
	})
	if pvc.Annotations["pv.kubernetes.io/bind-completed"] != "yes" {
		e.t.Errorf("claim annotations %v: want pv.kubernetes.io/bind-completed", pvc.Annotations)
	}
	if got, want := pvc.Status.Capacity[corev1.ResourceStorage], pv.Spec.Capacity[corev1.ResourceStorage]; got.Cmp(want) != 0 {
		e.t.Errorf("claim capacity %s, want the volume's %s", got.String(), want.String())
	}
	if !slices.Equal(pvc.Status.AccessModes, pv.Spec.AccessModes) {
		e.t.Errorf("claim access modes %v, want the volume's %v", pvc.Status.AccessModes, pv.Spec.AccessModes)
	}
	if ref := pv.Spec.ClaimRef; ref.Kind != "PersistentVolumeClaim" || ref.Namespace != "default" || ref.Name != claim {
		e.t.Errorf("volume claimRef %+v", ref)
	}
	if pv.Status.LastPhaseTransitionTime == nil {
		e.t.Errorf("volume has no lastPhaseTransitionTime")
	}
	return pvc, pv
}

func TestVolumeBinding(t *testing.T) {
	type want struct {
		volume string // "" stays Pending
		// The Event that shows the controller decided to leave the claim
		// Pending.
		reason, message string
		// bound-by-controller annotations on the claim and the volume.
		claimByController, volumeByController bool
	}
	for _, tc := range []struct {
		name    string
		classes []*storagev1.StorageClass
		volumes []*corev1.PersistentVolume
		claim   *corev1.PersistentVolumeClaim
		want    want
	}{{
		name: "the smallest volume that fits",
		volumes: []*corev1.PersistentVolume{testPV("one", "1Gi", modes(rwo)), testPV("ten", "10Gi", modes(rwo)),
			testPV("five", "5Gi", modes(rwo))},
		claim: testPVC("data", "2Gi", modes(rwo), class("")),
		want:  want{volume: "five", claimByController: true, volumeByController: true},
	}, {
		name: "every requested access mode, and the fewest others",
		volumes: []*corev1.PersistentVolume{testPV("rwo-only", "1Gi", modes(rwo)), testPV("all", "2Gi", modes(rwo, rox, rwx)),
			testPV("rwo-rwx", "5Gi", modes(rwo, rwx)), testPV("rwx-rox", "5Gi", modes(rox, rwx))},
		claim: testPVC("data", "1Gi", modes(rwx, rwo), class("")),
		want:  want{volume: "rwo-rwx", claimByController: true, volumeByController: true},
	}, {
		name: "the claim's class only",
		volumes: []*corev1.PersistentVolume{testPV("gold", "1Gi", modes(rwo), pvClass("gold")),
			testPV("silver", "2Gi", modes(rwo), pvClass("silver")), testPV("none", "1Gi", modes(rwo))},
		claim: testPVC("data", "1Gi", modes(rwo), class("silver")),
		want:  want{volume: "silver", claimByController: true, volumeByController: true},
	}, {
		name: "the claim's selector",
		volumes: []*corev1.PersistentVolume{testPV("slow", "1Gi", modes(rwo), pvLabels(map[string]string{"tier": "slow"})),
			testPV("fast", "2Gi", modes(rwo), pvLabels(map[string]string{"tier": "fast"}))},
		claim: testPVC("data", "1Gi", modes(rwo), class(""), func(c *corev1.PersistentVolumeClaim) {
			c.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "fast"}}
		}),
		want: want{volume: "fast", claimByController: true, volumeByController: true},
	}, {
		name: "the claim's volume mode",
		volumes: []*corev1.PersistentVolume{testPV("block", "1Gi", modes(rwo), func(pv *corev1.PersistentVolume) {
			block := corev1.PersistentVolumeBlock
			pv.Spec.VolumeMode = &block
			pv.Spec.HostPath, pv.Spec.Local = nil, &corev1.LocalVolumeSource{Path: "/dev/sda"}
			pvOnNode("pi-1")(pv)
		}), testPV("fs", "2Gi", modes(rwo))},
		claim: testPVC("data", "1Gi", modes(rwo), class("")),
		want:  want{volume: "fs", claimByController: true, volumeByController: true},
	}, {
		name:    "the volume the claim names",
		volumes: []*corev1.PersistentVolume{testPV("small", "1Gi", modes(rwo)), testPV("wanted", "5Gi", modes(rwo))},
		claim: testPVC("data", "1Gi", modes(rwo), class(""), func(c *corev1.PersistentVolumeClaim) {
			c.Spec.VolumeName = "wanted"
		}),
		want: want{volume: "wanted", claimByController: false, volumeByController: true},
	}, {
		name: "the volume pre-bound to the claim, whatever its class",
		volumes: []*corev1.PersistentVolume{testPV("free", "1Gi", modes(rwo)),
			testPV("reserved", "5Gi", modes(rwo), pvClass("gold"), pvClaimRef("data"))},
		claim: testPVC("data", "1Gi", modes(rwo), class("")),
		want:  want{volume: "reserved", claimByController: true, volumeByController: false},
	}, {
		name:    "not a volume pre-bound to another claim",
		volumes: []*corev1.PersistentVolume{testPV("theirs", "5Gi", modes(rwo), pvClaimRef("other"))},
		claim:   testPVC("data", "1Gi", modes(rwo), class("")),
		want:    want{reason: "FailedBinding", message: "no persistent volumes available for this claim and no storage class is set"},
	}, {
		name:    "none big enough",
		volumes: []*corev1.PersistentVolume{testPV("small", "1Gi", modes(rwo))},
		claim:   testPVC("data", "5Gi", modes(rwo), class("")),
		want:    want{reason: "FailedBinding", message: "no persistent volumes available for this claim and no storage class is set"},
	}, {
		name:    "none of a class that has no StorageClass",
		volumes: []*corev1.PersistentVolume{testPV("none", "1Gi", modes(rwo))},
		claim:   testPVC("data", "1Gi", modes(rwo), class("manual")),
		want:    want{reason: "ProvisioningFailed", message: `storageclass.storage.k8s.io "manual" not found`},
	}, {
		name:    "not a named volume too small",
		volumes: []*corev1.PersistentVolume{testPV("tiny", "1Gi", modes(rwo))},
		claim: testPVC("data", "5Gi", modes(rwo), class(""), func(c *corev1.PersistentVolumeClaim) {
			c.Spec.VolumeName = "tiny"
		}),
		want: want{reason: "VolumeMismatch", message: `Cannot bind to requested volume "tiny": requested PV is too small`},
	}, {
		name: "the default class filled into a claim without one",
		classes: []*storagev1.StorageClass{{ObjectMeta: metav1.ObjectMeta{Name: "standard",
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}}, Provisioner: "example.com/nfs"}},
		volumes: []*corev1.PersistentVolume{testPV("none", "1Gi", modes(rwo)), testPV("standard", "2Gi", modes(rwo), pvClass("standard"))},
		claim:   testPVC("data", "1Gi", modes(rwo), nil),
		want:    want{volume: "standard", claimByController: true, volumeByController: true},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newPVEnv(t)
			for _, sc := range tc.classes {
				e.createClass(sc)
			}
			for _, pv := range tc.volumes {
				e.createPV(pv)
			}
			// Only Available volumes are bound (as in Kubernetes): let the
			// controller get them there first.
			e.waitAvailable(tc.volumes...)
			e.createPVC(tc.claim)
			if tc.want.volume == "" {
				e.event("PersistentVolumeClaim", "data", tc.want.reason, tc.want.message)
				if pvc := e.mustPVC("data"); pvc.Status.Phase != corev1.ClaimPending || pvc.Spec.VolumeName != tc.claim.Spec.VolumeName {
					t.Errorf("claim %s, volumeName %q; want Pending, unchanged", pvc.Status.Phase, pvc.Spec.VolumeName)
				}
				for _, v := range tc.volumes {
					if pv := e.mustPV(v.Name); pv.Status.Phase == corev1.VolumeBound {
						t.Errorf("volume %s is Bound", v.Name)
					}
				}
				return
			}
			pvc, pv := e.waitBound("data", tc.want.volume)
			if got := pvc.Annotations["pv.kubernetes.io/bound-by-controller"] == "yes"; got != tc.want.claimByController {
				t.Errorf("claim bound-by-controller %v, want %v", got, tc.want.claimByController)
			}
			if got := pv.Annotations["pv.kubernetes.io/bound-by-controller"] == "yes"; got != tc.want.volumeByController {
				t.Errorf("volume bound-by-controller %v, want %v", got, tc.want.volumeByController)
			}
			if tc.claim.Spec.StorageClassName == nil && strDeref(pvc.Spec.StorageClassName) != pv.Spec.StorageClassName {
				t.Errorf("claim class %q, want the default %q", strDeref(pvc.Spec.StorageClassName), pv.Spec.StorageClassName)
			}
			for _, v := range tc.volumes {
				if other := e.mustPV(v.Name); v.Name != tc.want.volume && other.Status.Phase == corev1.VolumeBound {
					t.Errorf("volume %s is Bound too", v.Name)
				}
			}
		})
	}
}

func strDeref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// provisioned waits for the volume provisioned for a claim and returns it.
func (e *pvEnv) provisioned(claim string) (*corev1.PersistentVolumeClaim, *corev1.PersistentVolume) {
	e.t.Helper()
	return e.waitBound(claim, "pvc-"+string(e.mustPVC(claim).UID))
}

// localPathEnv is a pvEnv with the default local-path class and nodes pi-1
// and pi-2.
func newLocalPathEnv(t *testing.T) *pvEnv {
	e := newPVEnv(t)
	e.createClass(volumes.LocalPathStorageClass())
	e.createNode("pi-1")
	e.createNode("pi-2")
	return e
}

func onNode(node string) func(*corev1.PersistentVolumeClaim) {
	return func(c *corev1.PersistentVolumeClaim) {
		metav1.SetMetaDataAnnotation(&c.ObjectMeta, "volume.kubernetes.io/selected-node", node)
	}
}

func TestLocalPathProvisioning(t *testing.T) {
	e := newLocalPathEnv(t)

	t.Run("waits for its first consumer, then provisions on its node", func(t *testing.T) {
		e.t = t
		claim := e.createPVC(testPVC("data", "1Gi", modes(rwo), nil))
		if got := strDeref(claim.Spec.StorageClassName); got != "local-path" {
			t.Fatalf("claim's class %q, want the default local-path", got)
		}
		e.event("PersistentVolumeClaim", "data", "WaitForFirstConsumer", "waiting for first consumer to be created before binding")
		e.createPod("web", "", "data")
		e.event("PersistentVolumeClaim", "data", "WaitForPodScheduled", "waiting for pod web to be scheduled")
		if _, ok := e.getPV("pvc-" + string(claim.UID)); ok {
			t.Fatal("a volume was provisioned before the scheduler chose a node")
		}

		e.mutatePVC("data", onNode("pi-1")) // what the scheduler does
		pvc, pv := e.provisioned("data")
		want := "/var/lib/isle/storage/" + pv.Name + "_default_data"
		if hp := pv.Spec.HostPath; hp == nil || hp.Path != want || hp.Type == nil || *hp.Type != corev1.HostPathDirectoryOrCreate {
			t.Errorf("volume source %+v, want hostPath %s DirectoryOrCreate", pv.Spec.PersistentVolumeSource, want)
		}
		terms := pv.Spec.NodeAffinity.Required.NodeSelectorTerms
		if len(terms) != 1 || len(terms[0].MatchExpressions) != 1 || terms[0].MatchExpressions[0].Key != corev1.LabelHostname ||
			terms[0].MatchExpressions[0].Operator != corev1.NodeSelectorOpIn || !slices.Equal(terms[0].MatchExpressions[0].Values, []string{"pi-1-host"}) {
			t.Errorf("node affinity %+v, want kubernetes.io/hostname In [pi-1-host]", terms)
		}
		if q := pv.Spec.Capacity[corev1.ResourceStorage]; q.String() != "1Gi" || !slices.Equal(pv.Spec.AccessModes, modes(rwo)) {
			t.Errorf("capacity %s modes %v, want the claim's 1Gi [RWO]", q.String(), pv.Spec.AccessModes)
		}
		if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || pv.Spec.StorageClassName != "local-path" {
			t.Errorf("reclaim policy %s class %q, want the class's Delete, local-path", pv.Spec.PersistentVolumeReclaimPolicy, pv.Spec.StorageClassName)
		}
		if pv.Annotations["pv.kubernetes.io/provisioned-by"] != "isle.dev/local-path" || pv.Annotations["pv.kubernetes.io/bound-by-controller"] != "" {
			t.Errorf("volume annotations %v, want provisioned-by isle.dev/local-path and no bound-by-controller (it was pre-bound)", pv.Annotations)
		}
		for _, f := range []string{"kubernetes.io/pv-protection", "isle.dev/local-path-cleanup"} {
			if !slices.Contains(pv.Finalizers, f) {
				t.Errorf("volume finalizers %v, want %s", pv.Finalizers, f)
			}
		}
		if pvc.Annotations["volume.kubernetes.io/storage-provisioner"] != "isle.dev/local-path" ||
			pvc.Annotations["volume.beta.kubernetes.io/storage-provisioner"] != "isle.dev/local-path" {
			t.Errorf("claim annotations %v, want the storage-provisioner ones", pvc.Annotations)
		}
		e.event("PersistentVolumeClaim", "data", "ExternalProvisioning", "external provisioner 'isle.dev/local-path'")
		if ev := e.event("PersistentVolumeClaim", "data", "Provisioning", `External provisioner is provisioning volume for claim "default/data"`); ev.Source.Component != "isle.dev/local-path" {
			t.Errorf("Provisioning event from %q, want isle.dev/local-path", ev.Source.Component)
		}
		e.event("PersistentVolumeClaim", "data", "ProvisioningSucceeded", "Successfully provisioned volume "+pv.Name)
	})

	t.Run("a volume that fits the node is used first", func(t *testing.T) {
		e.t = t
		near := e.createPV(testPV("disk-pi-1", "5Gi", modes(rwo), pvClass("local-path"), pvOnNode("pi-1-host")))
		far := e.createPV(testPV("disk-pi-2", "2Gi", modes(rwo), pvClass("local-path"), pvOnNode("pi-2-host")))
		e.waitAvailable(near, far)
		e.createPVC(testPVC("logs", "1Gi", modes(rwo), nil, onNode("pi-1")))
		e.waitBound("logs", "disk-pi-1")
	})

	t.Run("ReadWriteMany is refused", func(t *testing.T) {
		e.t = t
		claim := e.createPVC(testPVC("shared", "1Gi", modes(rwx), nil, onNode("pi-1")))
		e.event("PersistentVolumeClaim", "shared", "ProvisioningFailed",
			`failed to provision volume with StorageClass "local-path": isle.dev/local-path only supports ReadWriteOnce and ReadWriteOncePod access modes`)
		if _, ok := e.getPV("pvc-" + string(claim.UID)); ok {
			t.Error("a volume was provisioned")
		}
		if pvc := e.mustPVC("shared"); pvc.Status.Phase != corev1.ClaimPending {
			t.Errorf("claim %s, want Pending", pvc.Status.Phase)
		}
	})

	t.Run("a node that is gone goes back to the scheduler", func(t *testing.T) {
		e.t = t
		e.createPVC(testPVC("orphan", "1Gi", modes(rwo), nil, onNode("pi-9")))
		e.event("PersistentVolumeClaim", "orphan", "ProvisioningFailed", `failed to get target node: node "pi-9" not found`)
		tabletest.Eventually(t, "the selected-node annotation is removed", func() bool {
			_, ok := e.mustPVC("orphan").Annotations["volume.kubernetes.io/selected-node"]
			return !ok
		})
	})
}

// bindManually makes a Retain volume and a claim that names it, and waits
// for them to be bound.
func (e *pvEnv) bindManually(name string, opts ...func(*corev1.PersistentVolume)) {
	e.t.Helper()
	e.createPV(testPV(name, "1Gi", modes(rwo), opts...))
	e.createPVC(testPVC(name, "1Gi", modes(rwo), class(""), func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = name }))
	e.waitBound(name, name)
}

func TestVolumeReclaim(t *testing.T) {
	e := newLocalPathEnv(t)

	t.Run("Retain keeps the volume Released", func(t *testing.T) {
		e.t = t
		e.bindManually("keep")
		e.deletePVC("keep")
		tabletest.Eventually(t, "the volume is Released", func() bool { return e.mustPV("keep").Status.Phase == corev1.VolumeReleased })
		pv := e.mustPV("keep")
		if pv.DeletionTimestamp != nil || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Name != "keep" {
			t.Errorf("released volume: deletionTimestamp %v claimRef %+v; want kept, still naming its claim", pv.DeletionTimestamp, pv.Spec.ClaimRef)
		}
	})

	t.Run("Delete deletes a provisioned volume once its node cleaned up", func(t *testing.T) {
		e.t = t
		e.createPVC(testPVC("scratch", "1Gi", modes(rwo), nil, onNode("pi-2")))
		_, pv := e.provisioned("scratch")
		e.deletePVC("scratch")
		tabletest.Eventually(t, "the volume is being deleted, held only by the cleanup finalizer", func() bool {
			cur, ok := e.getPV(pv.Name)
			return ok && cur.DeletionTimestamp != nil && cur.Status.Phase == corev1.VolumeReleased &&
				slices.Equal(cur.Finalizers, []string{"isle.dev/local-path-cleanup"})
		})
		// The node agent removes the directory, then the finalizer.
		e.mutatePV(pv.Name, func(v *corev1.PersistentVolume) { v.Finalizers = nil })
		tabletest.Eventually(t, "the volume is gone", func() bool { _, ok := e.getPV(pv.Name); return !ok })
	})

	t.Run("Retain set on a provisioned volume keeps it", func(t *testing.T) {
		e.t = t
		e.createPVC(testPVC("precious", "1Gi", modes(rwo), nil, onNode("pi-1")))
		_, pv := e.provisioned("precious")
		e.mutatePV(pv.Name, func(v *corev1.PersistentVolume) {
			v.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
		})
		tabletest.Eventually(t, "the cleanup finalizer is dropped", func() bool {
			return !slices.Contains(e.mustPV(pv.Name).Finalizers, "isle.dev/local-path-cleanup")
		})
		e.deletePVC("precious")
		tabletest.Eventually(t, "the volume is Released", func() bool { return e.mustPV(pv.Name).Status.Phase == corev1.VolumeReleased })
		if e.mustPV(pv.Name).DeletionTimestamp != nil {
			t.Error("a retained volume is being deleted")
		}
	})

	for _, tc := range []struct {
		policy          corev1.PersistentVolumeReclaimPolicy
		reason, message string
	}{
		{corev1.PersistentVolumeReclaimDelete, "VolumeFailedDelete", `error getting deleter volume plugin for volume "manual-delete": no deletable volume plugin matched`},
		{corev1.PersistentVolumeReclaimRecycle, "VolumeFailedRecycle", "No recycler plugin found for the volume!"},
	} {
		t.Run(string(tc.policy)+" fails on a volume nobody provisioned", func(t *testing.T) {
			e.t = t
			name := "manual-" + strings.ToLower(string(tc.policy))
			e.bindManually(name, pvPolicy(tc.policy))
			e.deletePVC(name)
			e.event("PersistentVolume", name, tc.reason, tc.message)
			pv := e.mustPV(name)
			if pv.Status.Phase != corev1.VolumeFailed || pv.Status.Message != tc.message || pv.DeletionTimestamp != nil {
				t.Errorf("volume %s %q deletionTimestamp %v, want Failed with the event's message, not deleted", pv.Status.Phase, pv.Status.Message, pv.DeletionTimestamp)
			}
		})
	}
}

func TestVolumeProtection(t *testing.T) {
	e := newPVEnv(t)

	t.Run("a claim used by a pod on a node stays until the pod is gone", func(t *testing.T) {
		e.t = t
		e.bindManually("db")
		if f := e.mustPVC("db").Finalizers; !slices.Equal(f, []string{"kubernetes.io/pvc-protection"}) {
			t.Errorf("claim finalizers %v, want kubernetes.io/pvc-protection", f)
		}
		if f := e.mustPV("db").Finalizers; !slices.Equal(f, []string{"kubernetes.io/pv-protection"}) {
			t.Errorf("volume finalizers %v, want kubernetes.io/pv-protection", f)
		}
		e.createPod("user", "pi-1", "db")
		e.createPod("waiting", "", "db") // not on a node: it does not hold the claim
		e.deletePVC("db")
		// The one claim worker syncs claims in the order they change: once
		// a claim deleted after db, and free, is removed, db has been looked
		// at since its deletion.
		e.bindManually("free")
		e.deletePVC("free")
		tabletest.Eventually(t, "the free claim is removed", func() bool { _, ok := e.getPVC("free"); return !ok })
		pvc, ok := e.getPVC("db")
		if !ok || pvc.DeletionTimestamp == nil || !slices.Contains(pvc.Finalizers, "kubernetes.io/pvc-protection") {
			t.Fatalf("claim in use: exists %v, want Terminating with its finalizer: %+v", ok, pvc)
		}
		if pv := e.mustPV("db"); pv.Status.Phase != corev1.VolumeBound {
			t.Errorf("volume of a claim in use is %s, want Bound", pv.Status.Phase)
		}
		zero := int64(0)
		if _, _, err := e.Delete(e.Ctx, e.pods, "default", "user", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
		tabletest.Eventually(t, "the claim is removed", func() bool { _, ok := e.getPVC("db"); return !ok })
		tabletest.Eventually(t, "its volume is Released", func() bool { return e.mustPV("db").Status.Phase == corev1.VolumeReleased })
	})

	t.Run("a bound volume stays until its claim is gone", func(t *testing.T) {
		e.t = t
		e.bindManually("vol")
		if _, deleted, err := e.Delete(e.Ctx, e.pvs, "", "vol", metav1.DeleteOptions{}); err != nil || deleted {
			t.Fatalf("delete a bound volume: deleted=%v err=%v, want it held", deleted, err)
		}
		// The one volume worker syncs volumes in the order they change: once
		// a volume created after the deletion is Available, vol has been
		// looked at since.
		e.waitAvailable(e.createPV(testPV("probe", "1Gi", modes(rwo))))
		if pv := e.mustPV("vol"); pv.Status.Phase != corev1.VolumeBound || !slices.Contains(pv.Finalizers, "kubernetes.io/pv-protection") {
			t.Fatalf("deleted bound volume %s, finalizers %v; want Bound, protected", pv.Status.Phase, pv.Finalizers)
		}
		e.deletePVC("vol")
		tabletest.Eventually(t, "the volume is removed", func() bool { _, ok := e.getPV("vol"); return !ok })
	})

	t.Run("a protection finalizer taken off comes back", func(t *testing.T) {
		e.t = t
		e.bindManually("again")
		e.mutatePVC("again", func(c *corev1.PersistentVolumeClaim) { c.Finalizers = nil })
		e.mutatePV("again", func(v *corev1.PersistentVolume) { v.Finalizers = nil })
		tabletest.Eventually(t, "both finalizers are back", func() bool {
			return slices.Contains(e.mustPVC("again").Finalizers, "kubernetes.io/pvc-protection") &&
				slices.Contains(e.mustPV("again").Finalizers, "kubernetes.io/pv-protection")
		})
	})
}

func TestVolumeRetroactiveDefaultClass(t *testing.T) {
	e := newPVEnv(t)
	e.createPVC(testPVC("early", "1Gi", modes(rwo), nil))
	e.event("PersistentVolumeClaim", "early", "FailedBinding", "no storage class is set")
	e.createPV(testPV("standard", "1Gi", modes(rwo), pvClass("standard")))
	e.createClass(&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "standard",
		Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}}, Provisioner: "example.com/nfs"})
	pvc, _ := e.waitBound("early", "standard")
	if got := strDeref(pvc.Spec.StorageClassName); got != "standard" {
		t.Errorf("claim class %q, want the default standard", got)
	}
}

func TestVolumeClaimLost(t *testing.T) {
	e := newPVEnv(t)
	e.bindManually("gone")
	// Forced away: deleted (protection holds it), then its finalizer taken
	// off (which the controller puts back only on a volume not deleted).
	if _, _, err := e.Delete(e.Ctx, e.pvs, "", "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.mutatePV("gone", func(v *corev1.PersistentVolume) { v.Finalizers = nil })
	e.event("PersistentVolumeClaim", "gone", "ClaimLost", "Bound claim has lost its PersistentVolume. Data on the volume is lost!")
	if pvc := e.mustPVC("gone"); pvc.Status.Phase != corev1.ClaimLost || pvc.Status.Capacity != nil {
		t.Errorf("claim %s capacity %v, want Lost with no capacity", pvc.Status.Phase, pvc.Status.Capacity)
	}
}
