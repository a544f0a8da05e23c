package sasecrets_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/isle-cluster/isle/control/controllers"
	"github.com/isle-cluster/isle/control/controllers/internal/tabletest"
)

// issue makes a token that says what it was made for, so that the test
// sees which service account and Secret the controller asked one for.
func issue(ns, sa, uid, secret string) (string, error) {
	return fmt.Sprintf("token:%s/%s/%s/%s", ns, sa, uid, secret), nil
}

func tokenSecret(name, sa string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{corev1.ServiceAccountNameKey: sa}},
		Type: corev1.SecretTypeServiceAccountToken}
}

func TestTokenSecrets(t *testing.T) {
	e := tabletest.New(t, controllers.WithServiceAccountSecrets(issue))
	sas := e.Res(t, "", "v1", "serviceaccounts")
	secrets := e.Res(t, "", "v1", "secrets")
	e.Namespace(t, "team")
	sa := e.MustCreate(t, sas, "team", &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}})
	e.MustCreate(t, secrets, "team", tokenSecret("robot-token", "robot"))
	get := func(name string) *corev1.Secret {
		obj, ok := e.Exists(t, secrets, "team", name)
		if !ok {
			return nil
		}
		return obj.(*corev1.Secret)
	}
	want := fmt.Sprintf("token:team/robot/%s/robot-token", sa.GetUID())
	filled := func() bool {
		s := get("robot-token")
		return s != nil && string(s.Data["token"]) == want && string(s.Data["ca.crt"]) == tabletest.TestCAPEM &&
			string(s.Data["namespace"]) == "team" && s.Annotations[corev1.ServiceAccountUIDKey] == string(sa.GetUID())
	}
	tabletest.Eventually(t, "the token Secret filled", filled)

	// Its ca.crt changed by someone: put back, the token kept.
	if _, err := e.Mutate(e.Ctx, secrets, "team", "robot-token", "", func(o runtime.Object) error {
		o.(*corev1.Secret).Data["ca.crt"] = []byte("mine")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	tabletest.Eventually(t, "ca.crt put back", filled)

	// A Secret of no service account, or of one made again: deleted.
	e.MustCreate(t, secrets, "team", tokenSecret("ghost-token", "ghost"))
	stale := tokenSecret("stale-token", "robot")
	stale.Annotations[corev1.ServiceAccountUIDKey] = "an-older-uid"
	e.MustCreate(t, secrets, "team", stale)
	tabletest.Eventually(t, "the Secrets of no service account deleted", func() bool {
		return get("ghost-token") == nil && get("stale-token") == nil
	})

	// Other Secrets are left alone.
	e.MustCreate(t, secrets, "team", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "app", Annotations: map[string]string{corev1.ServiceAccountNameKey: "ghost"}},
		Data: map[string][]byte{"token": []byte("mine")}})

	// The service account deleted: its Secret too.
	if _, _, err := e.Delete(e.Ctx, sas, "team", "robot", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	tabletest.Eventually(t, "the deleted service account's Secret deleted", func() bool { return get("robot-token") == nil })
	if s := get("app"); s == nil || string(s.Data["token"]) != "mine" {
		t.Errorf("an Opaque Secret changed: %+v", s)
	}
}
