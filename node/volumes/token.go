package volumes

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Tokens of projected serviceAccountToken sources are asked of the API
// (TokenRequest, bound to the pod) and kept, as the kubelet keeps them:
// a token is asked again once 80% of its life has passed, or after a day,
// so the file is always fresh; the volume's resync writes it.
const tokenMaxAge = 24 * time.Hour

type tokenKey struct {
	pod      types.UID
	audience string
	seconds  int64
}

type cachedToken struct {
	token           string
	issued, expires time.Time
}

// tokenCache holds the pods' tokens.
type tokenCache struct {
	mu     sync.Mutex
	tokens map[tokenKey]cachedToken
}

// stale reports whether t needs replacing at now.
func (t cachedToken) stale(now time.Time) bool {
	life := t.expires.Sub(t.issued)
	return now.After(t.issued.Add(life*8/10)) || now.After(t.issued.Add(tokenMaxAge))
}

// token is pod's token for src, asked of the API when there is none or it
// is stale. A failure while a cached token is still valid keeps that one.
func (m *Manager) token(ctx context.Context, pod *corev1.Pod, src *corev1.ServiceAccountTokenProjection) (string, error) {
	seconds := int64(3600)
	if src.ExpirationSeconds != nil {
		seconds = *src.ExpirationSeconds
	}
	key := tokenKey{pod: pod.UID, audience: src.Audience, seconds: seconds}
	now := time.Now()
	m.tokens.mu.Lock()
	cached, ok := m.tokens.tokens[key]
	m.tokens.mu.Unlock()
	if ok && !cached.stale(now) {
		return cached.token, nil
	}
	tok, expires, err := m.cfg.Sources.Token(ctx, pod, src.Audience, seconds)
	if err != nil {
		if ok && now.Before(cached.expires) {
			m.log.Warn("volumes: service-account token not renewed; the current one stays", "pod", pod.Namespace+"/"+pod.Name, "expires", cached.expires, "err", err)
			return cached.token, nil
		}
		return "", fmt.Errorf("service-account token: %w", err)
	}
	m.tokens.mu.Lock()
	if m.tokens.tokens == nil {
		m.tokens.tokens = map[tokenKey]cachedToken{}
	}
	m.tokens.tokens[key] = cachedToken{token: tok, issued: now, expires: expires}
	m.tokens.mu.Unlock()
	return tok, nil
}

// forgetTokens drops the tokens of a pod torn down.
func (m *Manager) forgetTokens(uid types.UID) {
	m.tokens.mu.Lock()
	defer m.tokens.mu.Unlock()
	for k := range m.tokens.tokens {
		if k.pod == uid {
			delete(m.tokens.tokens, k)
		}
	}
}
