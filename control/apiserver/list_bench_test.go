package apiserver_test

import (
	"fmt"
	"testing"
)

// benchPodJSON is a pod as a Deployment's ReplicaSet makes it, bound and
// running, about 2 KiB of JSON: make bench-api's pods.
func benchPodJSON(i int) string {
	return fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-6d8f7b9c54-%05d",`+
		`"labels":{"app":"bench","pod-template-hash":"6d8f7b9c54","tier":"frontend"},`+
		`"annotations":{"kubectl.kubernetes.io/restartedAt":"2025-01-01T00:00:00Z","prometheus.io/scrape":"true","prometheus.io/port":"9090","prometheus.io/path":"/metrics"}},`+
		`"spec":{"nodeName":"bench","containers":[{"name":"web","image":"registry.example.com/bench/web:1.27.3",`+
		`"args":["--listen=:8080","--metrics=:9090","--config=/etc/web/config.yaml"],`+
		`"ports":[{"name":"http","containerPort":8080,"protocol":"TCP"},{"name":"metrics","containerPort":9090,"protocol":"TCP"}],`+
		`"env":[{"name":"LOG_LEVEL","value":"info"},{"name":"CACHE_SIZE_MB","value":"64"},{"name":"UPSTREAM_URL","value":"http://api.default.svc.cluster.local:8080"},`+
		`{"name":"FEATURE_FLAGS","value":"compression,etag,request-id"},{"name":"SESSION_TTL","value":"30m"},{"name":"MAX_CONNECTIONS","value":"512"},`+
		`{"name":"OTEL_EXPORTER_OTLP_ENDPOINT","value":"http://otel-collector.monitoring.svc.cluster.local:4317"},{"name":"OTEL_SERVICE_NAME","value":"web"},`+
		`{"name":"POD_NAME","valueFrom":{"fieldRef":{"fieldPath":"metadata.name"}}},{"name":"POD_IP","valueFrom":{"fieldRef":{"fieldPath":"status.podIP"}}}],`+
		`"resources":{"requests":{"cpu":"100m","memory":"64Mi"},"limits":{"cpu":"500m","memory":"128Mi"}},`+
		`"readinessProbe":{"httpGet":{"path":"/healthz","port":"http","scheme":"HTTP"},"initialDelaySeconds":5,"periodSeconds":10,"timeoutSeconds":2,"successThreshold":1,"failureThreshold":3},`+
		`"volumeMounts":[{"name":"config","mountPath":"/etc/web","readOnly":true}],"imagePullPolicy":"IfNotPresent"}],`+
		`"volumes":[{"name":"config","configMap":{"name":"web-config"}}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,`+
		`"dnsPolicy":"ClusterFirst","serviceAccountName":"default","securityContext":{"runAsNonRoot":true,"runAsUser":10001}}}`, i)
}

// BenchmarkListPodsTable: kubectl get pods of 1,000 pods, the Table
// make bench-api asks for, through the whole handler, and the same list
// as JSON. (On a 2-CPU machine, three runs each: the Table 86-94 ms with
// sigs.k8s.io/json and the managed fields decoded, 35-42 ms in one pass
// without them; JSON 112-123 ms, 70-77 ms.)
func BenchmarkListPodsTable(b *testing.B) {
	e := newEnv(b)
	for i := range 1000 {
		mustCode(b, e.admin(b, "POST", "/api/v1/namespaces/default/pods", benchPodJSON(i)), 201)
	}
	for _, c := range []struct{ name, accept string }{
		{"table", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"},
		{"json", "application/json"},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if r := e.admin(b, "GET", "/api/v1/namespaces/default/pods", "", "Accept", c.accept); r.code != 200 {
					b.Fatalf("%d %s", r.code, r)
				}
			}
		})
	}
}
