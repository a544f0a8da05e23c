package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// informerLog records what an informer's handlers saw, per object.
type informerLog struct {
	mu      sync.Mutex
	adds    map[string]int
	deletes map[string]int
	rvs     map[string][]int64 // resourceVersions seen, in order
}

func (l *informerLog) record(kind string, obj any) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		if t, isTomb := obj.(cache.DeletedFinalStateUnknown); isTomb {
			cm, ok = t.Obj.(*corev1.ConfigMap)
		}
		if !ok {
			return
		}
	}
	rv, _ := strconv.ParseInt(cm.ResourceVersion, 10, 64)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch kind {
	case "add":
		l.adds[cm.Name]++
	case "delete":
		l.deletes[cm.Name]++
	}
	if n := len(l.rvs[cm.Name]); kind != "delete" && n > 0 && l.rvs[cm.Name][n-1] == rv {
		return // a relist's update of an unchanged object is not a change
	}
	l.rvs[cm.Name] = append(l.rvs[cm.Name], rv)
}

// TestInformer runs a client-go informer against a three-server cluster:
// it must see every change exactly once and in order, also across a forced
// 410 Gone. The informer's server is stopped while the others write enough
// to snapshot and compact; on restart that server installs a snapshot, its
// watch history starts after the informer's last resourceVersion, the
// re-watch gets 410 and the informer relists.
func TestInformer(t *testing.T) {
	bin := isleBinary(t)
	c := startStore(t, bin, 3, "--snapshot-entries", "40", "--snapshot-catchup-entries", "5")
	admin := adminClient(t, bin, c.members[0])
	waitAPIReady(t, admin)

	kc := filepath.Join(t.TempDir(), "kubeconfig")
	informed := c.members[1] // not the first: the test writes through the first
	if out, err := exec.Command(bin, "kubeconfig", "--data-dir", informed.dir, "-o", kc, "--server", "https://"+informed.apiAddr()).CombinedOutput(); err != nil {
		t.Fatalf("isle kubeconfig: %v %s", err, out)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	log := &informerLog{adds: map[string]int{}, deletes: map[string]int{}, rvs: map[string][]int64{}}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace("default"))
	inf := factory.Core().V1().ConfigMaps().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { log.record("add", o) },
		UpdateFunc: func(_, o any) { log.record("update", o) },
		DeleteFunc: func(o any) { log.record("delete", o) },
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	if !cache.WaitForCacheSync(stop, inf.HasSynced) {
		t.Fatal("informer never synced")
	}

	writer := kubernetes.NewForConfigOrDie(func() *rest.Config {
		kc0 := filepath.Join(t.TempDir(), "kubeconfig")
		if out, err := exec.Command(bin, "kubeconfig", "--data-dir", c.members[0].dir, "-o", kc0, "--server", "https://"+c.members[0].apiAddr()).CombinedOutput(); err != nil {
			t.Fatalf("isle kubeconfig: %v %s", err, out)
		}
		rc, err := clientcmd.BuildConfigFromFlags("", kc0)
		if err != nil {
			t.Fatal(err)
		}
		rc.QPS, rc.Burst = 1000, 1000 // client-go throttles to 5/s by default
		return rc
	}()).CoreV1().ConfigMaps("default")
	ctx := context.Background()
	create := func(name string) {
		if _, err := writer.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"v": "0"}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	update := func(name, v string) {
		cm, err := writer.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data["v"] = v
		if _, err := writer.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("update %s: %v", name, err)
		}
	}
	for i := 0; i < 10; i++ {
		create(fmt.Sprintf("cm-%02d", i))
	}
	for i := 0; i < 10; i += 2 {
		update(fmt.Sprintf("cm-%02d", i), "1")
	}
	if err := writer.Delete(ctx, "cm-09", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the informer to see the first changes", func() bool {
		log.mu.Lock()
		defer log.mu.Unlock()
		return log.deletes["cm-09"] == 1 && len(log.rvs["cm-08"]) == 2
	})

	// Force a 410: the informer's server misses a snapshot's worth of writes.
	start := time.Now()
	informed.kill(t)
	for i := 10; i < 70; i++ {
		create(fmt.Sprintf("cm-%02d", i))
	}
	if err := writer.Delete(ctx, "cm-00", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	update("cm-02", "2")
	t.Logf("writes while the informer's server was down: %v", time.Since(start))
	informed.start(t)
	t.Logf("informer's server restarted: %v", time.Since(start))

	want, err := writer.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Caught up: the store as the server's list, and every handler called
	// (the informer updates its store before it calls the handlers).
	waitFor(t, 30*time.Second, "the informer to catch up after the relist", func() bool {
		log.mu.Lock()
		defer log.mu.Unlock()
		for _, cm := range want.Items {
			if log.adds[cm.Name] == 0 {
				return false
			}
		}
		return len(inf.GetStore().List()) == len(want.Items) && log.deletes["cm-00"] == 1
	})
	t.Logf("informer caught up: %v", time.Since(start))
	log.mu.Lock()
	defer log.mu.Unlock()
	for _, cm := range want.Items {
		if log.adds[cm.Name] != 1 {
			t.Errorf("%s: added %d times, want once", cm.Name, log.adds[cm.Name])
		}
		rvs := log.rvs[cm.Name]
		for i := 1; i < len(rvs); i++ {
			if rvs[i] <= rvs[i-1] {
				t.Errorf("%s: resourceVersions out of order: %v", cm.Name, rvs)
			}
		}
		if last := strconv.Itoa(int(rvs[len(rvs)-1])); last != cm.ResourceVersion {
			t.Errorf("%s: informer ended at %s, the server has %s", cm.Name, last, cm.ResourceVersion)
		}
	}
	for _, name := range []string{"cm-00", "cm-09"} {
		if log.deletes[name] != 1 {
			t.Errorf("%s: deleted %d times, want once", name, log.deletes[name])
		}
	}
	if got := len(log.rvs["cm-02"]); got != 3 {
		t.Errorf("cm-02 changed three times (create, update, update after the relist); the informer saw %d: %v", got, log.rvs["cm-02"])
	}
	if data, err := os.ReadFile(informed.log.Name()); err == nil && !containsAll(string(data), "installed snapshot") {
		t.Errorf("the informer's server did not install a snapshot, so no 410 was forced")
	}
}

func containsAll(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}
