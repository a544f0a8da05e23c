package apiserver_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestServerSideApply: PATCH with application/apply-patch+yaml creates
// (201) then updates (200); a conflict is 409 with the fields as causes;
// writes without a fieldManager are their user agent's.
func TestServerSideApply(t *testing.T) {
	e := newEnv(t)
	const path = "/api/v1/namespaces/default/configmaps/c"
	apply := func(manager, data string, force bool) response {
		q := "?fieldManager=" + manager
		if force {
			q += "&force=true"
		}
		return e.admin(t, "PATCH", path+q, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  a: \""+data+"\"\n",
			"Content-Type", "application/apply-patch+yaml")
	}
	mustCode(t, apply("alice", "1", false), 201)
	mustCode(t, apply("alice", "2", false), 200)
	st := mustCode(t, apply("bob", "3", false), 409).status(t)
	if st.Reason != metav1.StatusReasonConflict || !strings.Contains(st.Message, `conflict with "alice": .data.a`) ||
		st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Type != metav1.CauseTypeFieldManagerConflict {
		t.Fatalf("conflict: %+v", st)
	}
	mustCode(t, apply("bob", "3", true), 200)

	r := mustCode(t, e.admin(t, "PATCH", path, `{"data":{"b":"x"}}`, "Content-Type", "application/merge-patch+json", "User-Agent", "kubectl/v1.33.0 (linux/amd64)"), 200)
	var cm struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	r.decode(t, &cm)
	managers := map[string]string{}
	for _, mf := range cm.Metadata.ManagedFields {
		managers[mf.Manager] = string(mf.Operation)
	}
	if managers["bob"] != "Apply" || managers["kubectl"] != "Update" {
		t.Fatalf("managers %v", managers)
	}
}
