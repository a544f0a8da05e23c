package island

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/isle-cluster/isle/control/wire"
	"github.com/isle-cluster/isle/node/bootstrap"
)

// kubeconfig is the part of an administrator's kubeconfig the island
// reads: one cluster and one user with a client certificate.
type kubeconfig struct {
	Clusters []struct {
		Cluster struct {
			Server string `json:"server"`
			CA     []byte `json:"certificate-authority-data"`
		} `json:"cluster"`
	} `json:"clusters"`
	Users []struct {
		User struct {
			Cert []byte `json:"client-certificate-data"`
			Key  []byte `json:"client-key-data"`
		} `json:"user"`
	} `json:"users"`
}

// apiClient is an HTTPS client of the island's API with the
// administrator's certificate, and the API's URL.
func apiClient(path string) (*http.Client, string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("island: %w", err)
	}
	var kc kubeconfig
	if err := yaml.Unmarshal(b, &kc); err != nil || len(kc.Clusters) != 1 || len(kc.Users) != 1 {
		return nil, "", fmt.Errorf("island: %s is not a kubeconfig of one cluster and one user (%v)", path, err)
	}
	cert, err := tls.X509KeyPair(kc.Users[0].User.Cert, kc.Users[0].User.Key)
	if err != nil {
		return nil, "", fmt.Errorf("island: %s: client certificate: %w", path, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(kc.Clusters[0].Cluster.CA) {
		return nil, "", fmt.Errorf("island: %s: no CA certificate", path)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}, kc.Clusters[0].Cluster.Server, nil
}

// waitReady waits until every board's Node is Ready.
func waitReady(ctx context.Context, s *State) error {
	client, server, err := apiClient(s.Kubeconfig())
	if err != nil {
		return err
	}
	defer client.CloseIdleConnections()
	var notReady []string
	for {
		notReady, err = nodesNotReady(ctx, client, server, s)
		if err == nil && len(notReady) == 0 {
			return nil
		}
		for _, b := range s.Boards {
			if !b.Isle.Alive() {
				return fmt.Errorf("%s's isle exited; %s ends with:\n%s", b.Name, s.logPath(&b, "isle"), logTail(s.logPath(&b, "isle")))
			}
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return fmt.Errorf("the Nodes are not Ready in time (the API at %s: %v)", server, err)
			}
			return fmt.Errorf("the Nodes of %s are not Ready in time", strings.Join(notReady, ", "))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// nodesNotReady lists the boards whose Node is missing or not Ready.
func nodesNotReady(ctx context.Context, client *http.Client, server string, s *State) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, server+"/api/v1/nodes", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /api/v1/nodes: %s", resp.Status)
	}
	var nodes corev1.NodeList
	if err := json.NewDecoder(resp.Body).Decode(&nodes); err != nil {
		return nil, fmt.Errorf("GET /api/v1/nodes: %w", err)
	}
	var ready []string
	for _, n := range nodes.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready = append(ready, n.Name)
			}
		}
	}
	var out []string
	for _, b := range s.Boards {
		if !slices.Contains(ready, b.Name) {
			out = append(out, b.Name)
		}
	}
	return out, nil
}

// storeStanding asks the servers for each board's standing in the store
// (leader, voter, learner).
func storeStanding(ctx context.Context, s *State, token string) (map[string]string, error) {
	tok, err := wire.ParseToken(token)
	if err != nil {
		return nil, fmt.Errorf("island: %w", err)
	}
	var members []wire.MemberInfo
	addr := strings.TrimPrefix(s.APIServer(), "https://")
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := bootstrap.NewClient(tok, nil).Do(cctx, http.MethodGet, addr, wire.MembersPath, nil, &members, ""); err != nil {
		return nil, fmt.Errorf("island: members: %w", err)
	}
	out := map[string]string{}
	for _, m := range members {
		out[m.Name] = m.Raft
	}
	if len(out) == 0 {
		return nil, errors.New("island: members: none")
	}
	return out, nil
}

// waitVoters waits until every server votes in the store, and returns
// the boards' standing.
func waitVoters(ctx context.Context, s *State, token string) (map[string]string, error) {
	for {
		standing, err := storeStanding(ctx, s, token)
		all := true
		for _, b := range s.Boards {
			all = all && (b.Role != RoleServer || standing[b.Name] == "leader" || standing[b.Name] == "voter")
		}
		if err == nil && all {
			return standing, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("the servers are not all voters in time (%v; %v)", standing, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Token is the island's cluster token.
func (s *State) Token() (string, error) { return s.tokenFile("token") }

// AgentToken returns the agent token the first server made.
func (s *State) AgentToken() (string, error) { return s.tokenFile("agent-token") }

// tokenFor returns the token a board of role joins with: an agent the
// agent token, unless the cluster was made by a release without them.
func (s *State) tokenFor(role string) (string, error) {
	if role != RoleServer {
		if tok, err := s.AgentToken(); err == nil || !errors.Is(err, fs.ErrNotExist) {
			return tok, err
		}
	}
	return s.Token()
}

func (s *State) tokenFile(name string) (string, error) {
	if len(s.Boards) == 0 {
		return "", fmt.Errorf("island: %w", ErrNoIsland)
	}
	b, err := os.ReadFile(filepath.Join(s.dataDir(&s.Boards[0]), name))
	if err != nil {
		return "", fmt.Errorf("island: the cluster's %s: %w", name, err)
	}
	return strings.TrimSpace(string(b)), nil
}
