// Command webhookserver is the admission webhook of the end-to-end tests,
// run in a pod behind a Service:
//
//	POST /validate   refuses a ConfigMap with a key "deny"; warns of one
//	                 with a key "warn"
//	POST /mutate     labels the object webhook=seen (JSON patch)
//	GET  /healthz    200
//
// It serves TLS on :8443 with the PEM certificate and key in $TLS_CERT
// and $TLS_KEY.
package main

import (
	"crypto/tls"
	"encoding/json"
	"log"
	"net/http"
	"os"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func main() {
	cert, err := tls.X509KeyPair([]byte(os.Getenv("TLS_CERT")), []byte(os.Getenv("TLS_KEY")))
	if err != nil {
		log.Fatalf("webhookserver: the certificate: %v", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("POST /validate", review(validate))
	mux.HandleFunc("POST /mutate", review(mutate))
	srv := &http.Server{Addr: ":8443", Handler: mux, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}
	log.Fatal(srv.ListenAndServeTLS("", ""))
}

// review decodes an AdmissionReview, answers it with f and logs it.
func review(f func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var ar admissionv1.AdmissionReview
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 8<<20)).Decode(&ar); err != nil || ar.Request == nil {
			http.Error(w, "want an AdmissionReview with a request", http.StatusBadRequest)
			return
		}
		resp := f(ar.Request)
		resp.UID = ar.Request.UID
		log.Printf("%s %s %s %s/%s by %s: allowed %v", r.URL.Path, ar.Request.Operation, ar.Request.Resource.Resource,
			ar.Request.Namespace, ar.Request.Name, ar.Request.UserInfo.Username, resp.Allowed)
		ar.Request, ar.Response = nil, resp
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&ar)
	}
}

func validate(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	var obj struct {
		Data map[string]string `json:"data"`
	}
	_ = json.Unmarshal(req.Object.Raw, &obj)
	if _, ok := obj.Data["deny"]; ok {
		return &admissionv1.AdmissionResponse{Result: &metav1.Status{Message: "the webhook pod refuses ConfigMaps with a key deny", Code: http.StatusForbidden}}
	}
	resp := &admissionv1.AdmissionResponse{Allowed: true}
	if _, ok := obj.Data["warn"]; ok {
		resp.Warnings = []string{"the webhook pod warns of a key warn"}
	}
	return resp
}

func mutate(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	var obj struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(req.Object.Raw, &obj)
	patch := `[{"op":"add","path":"/metadata/labels","value":{"webhook":"seen"}}]`
	if obj.Metadata.Labels != nil {
		patch = `[{"op":"add","path":"/metadata/labels/webhook","value":"seen"}]`
	}
	pt := admissionv1.PatchTypeJSONPatch
	return &admissionv1.AdmissionResponse{Allowed: true, PatchType: &pt, Patch: []byte(patch)}
}
