package strategy

import coordinationv1 "k8s.io/api/coordination/v1"

// Lease is the strategy of coordination.k8s.io/v1 Leases.
var Lease = &Kind[*coordinationv1.Lease]{namespaced: true, create: validateLease, update: validateLeaseUpdate}
