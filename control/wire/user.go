package wire

import "time"

// UserRequest asks a server's admin socket for a person's account (isle
// user add).
type UserRequest struct {
	Name   string   `json:"name"`
	Groups []string `json:"groups,omitempty"`
	// Namespace and Role: the user gets Role (admin, edit or view) in
	// Namespace, made if missing; Role without Namespace binds it
	// cluster-wide.
	Namespace string `json:"namespace,omitempty"`
	Role      string `json:"role,omitempty"`
	// TTL is how long the certificate is valid (a Go duration).
	TTL string `json:"ttl,omitempty"`
}

// UserInfo is a person's account as isle user list shows it.
type UserInfo struct {
	Name      string    `json:"name"`
	Groups    []string  `json:"groups,omitempty"`
	Namespace string    `json:"namespace,omitempty"`
	Role      string    `json:"role,omitempty"`
	Serial    string    `json:"serial"`
	NotAfter  time.Time `json:"notAfter"`
	Created   time.Time `json:"created"`
}

// UserAdded is the answer to a UserRequest: the account and the person's
// kubeconfig (its private key is in it and nowhere else).
type UserAdded struct {
	User       UserInfo `json:"user"`
	Kubeconfig []byte   `json:"kubeconfig"`
}
