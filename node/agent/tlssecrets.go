package agent

import (
	"context"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// tlsSecrets follows the TLS Secrets the served Ingresses name, one watch
// each by name: a board may read no other Secrets, and none by listing
// them (the Node authorizer).
type tlsSecrets struct {
	client *rest.RESTClient
	// changed is called when a followed Secret changes.
	changed func()

	mu      sync.Mutex
	watches map[string]*secretWatch // namespace/name
}

type secretWatch struct {
	stop     context.CancelFunc
	informer cache.SharedIndexInformer
}

func newTLSSecrets(client *rest.RESTClient, changed func()) *tlsSecrets {
	return &tlsSecrets{client: client, changed: changed, watches: map[string]*secretWatch{}}
}

// follow makes the followed Secrets keys (namespace/name): watches of
// those not followed yet start, those no longer named stop.
func (t *tlsSecrets) follow(ctx context.Context, keys []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for key, w := range t.watches {
		if !slices.Contains(keys, key) {
			w.stop()
			delete(t.watches, key)
		}
	}
	for _, key := range keys {
		if t.watches[key] != nil {
			continue
		}
		ns, name, _ := strings.Cut(key, "/")
		lw := cache.NewFilteredListWatchFromClient(t.client, "secrets", ns, func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		})
		inf := cache.NewSharedIndexInformer(lw, &corev1.Secret{}, 0, cache.Indexers{})
		poke := func(any) { t.changed() }
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: poke,
			UpdateFunc: func(_, n any) { poke(n) }, DeleteFunc: poke}); err != nil {
			continue
		}
		wctx, stop := context.WithCancel(ctx)
		t.watches[key] = &secretWatch{stop: stop, informer: inf}
		go inf.Run(wctx.Done())
	}
}

// list is what the watches hold.
func (t *tlsSecrets) list() []*corev1.Secret {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*corev1.Secret
	for _, w := range t.watches {
		out = append(out, listOf[*corev1.Secret](w.informer)...)
	}
	return out
}
