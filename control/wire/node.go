package wire

// What the control plane and the boards agree on about Nodes' parts.
const (
	// IngressController is the spec.controller of the IngressClasses the
	// boards' ingress serves.
	IngressController = "isle.dev/ingress"
	// LabelLocalPathNode is on each local-path PersistentVolume: the node
	// that holds its directory. A board lists the volumes labelled with its
	// own name (the only volumes it may list) to clean up deleted ones.
	LabelLocalPathNode = "isle.dev/local-path-node"
)
