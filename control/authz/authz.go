// Package authz decides who may do what, as kube-apiserver's authorizer
// chain does: members of system:masters may do anything; a node's
// credential is held to what its own pods need (the Node authorizer,
// node.go, and NodeRestriction admission, restriction.go); everyone else
// gets what RBAC grants (rbac.go), kept in memory from the store's
// Roles, ClusterRoles and their bindings (index.go). It also holds
// upstream's bootstrap policy (policy.go) and the escalation check of RBAC
// writes (escalation.go).
package authz

import (
	"fmt"
	"slices"
	"strings"
)

// User is an authenticated identity.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// InGroup reports whether u is a member of group.
func (u *User) InGroup(group string) bool { return slices.Contains(u.Groups, group) }

// Well-known users, groups and name prefixes, as in Kubernetes.
const (
	GroupMasters         = "system:masters"
	GroupNodes           = "system:nodes"
	GroupAuthenticated   = "system:authenticated"
	GroupUnauthenticated = "system:unauthenticated"
	GroupServiceAccounts = "system:serviceaccounts"
	NodeUserPrefix       = "system:node:"
	ServiceAccountPrefix = "system:serviceaccount:"
	Anonymous            = "system:anonymous"
)

// NodeName is the node whose credential u is ("" if u is no node's).
func NodeName(u *User) string {
	if !u.InGroup(GroupNodes) || !strings.HasPrefix(u.Name, NodeUserPrefix) {
		return ""
	}
	return strings.TrimPrefix(u.Name, NodeUserPrefix)
}

// ServiceAccountUser is the user name of a service account.
func ServiceAccountUser(namespace, name string) string {
	return ServiceAccountPrefix + namespace + ":" + name
}

// Attributes are what a request asks, as upstream's authorizer.Attributes.
type Attributes struct {
	User *User
	Verb string
	// ResourceRequest: a request of the API's resources; otherwise of
	// Path.
	ResourceRequest bool
	APIGroup        string
	APIVersion      string
	Resource        string
	Subresource     string
	Namespace       string
	// Name is the object's name: from the URL, from a list's or watch's
	// field selector metadata.name=NAME, or the name of the object a
	// create makes (which RBAC leaves aside, as kube-apiserver, which
	// authorizes creates before it reads the body).
	Name string
	// LabelSelector is a list's or watch's label selector, as given.
	LabelSelector string
	Path          string
}

// Decision is an authorizer's answer.
type Decision int

const (
	// NoOpinion leaves the request to the next authorizer (the last one's
	// NoOpinion is a refusal).
	NoOpinion Decision = iota
	Allow
	Deny
)

// Authorizer decides a request; reason explains a refusal, as upstream
// appends it to the 403's message.
type Authorizer interface {
	Authorize(a Attributes) (d Decision, reason string)
}

// Chain is kube-apiserver's authorizer chain: system:masters, then the
// Node authorizer, then RBAC; the first decision other than NoOpinion
// stands.
type Chain struct {
	Node *NodeAuthorizer
	RBAC *RBAC
}

// Synced is closed once the chain's index has read the store.
func (c *Chain) Synced() <-chan struct{} { return c.RBAC.Index.Synced() }

// Authorize decides a.
func (c *Chain) Authorize(a Attributes) (Decision, string) {
	if a.User.InGroup(GroupMasters) {
		return Allow, ""
	}
	var reasons []string
	for _, z := range []Authorizer{c.Node, c.RBAC} {
		d, why := z.Authorize(a)
		if d != NoOpinion {
			return d, why
		}
		if why != "" {
			reasons = append(reasons, why)
		}
	}
	return NoOpinion, strings.Join(reasons, "; ")
}

// Forbidden is the message of a 403, worded as kube-apiserver words it
// (the resource's kind and name come before it).
func Forbidden(a Attributes, reason string) string {
	var msg string
	if !a.ResourceRequest {
		msg = fmt.Sprintf("User %q cannot %s path %q", a.User.Name, a.Verb, a.Path)
	} else {
		res := a.Resource
		if a.Subresource != "" {
			res += "/" + a.Subresource
		}
		scope := "at the cluster scope"
		if a.Namespace != "" {
			scope = fmt.Sprintf("in the namespace %q", a.Namespace)
		}
		msg = fmt.Sprintf("User %q cannot %s resource %q in API group %q %s", a.User.Name, a.Verb, res, a.APIGroup, scope)
	}
	if reason != "" {
		msg += ": " + reason
	}
	return msg
}
