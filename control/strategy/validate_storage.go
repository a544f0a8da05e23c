package strategy

import (
	"path"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validation of PersistentVolumes, PersistentVolumeClaims and
// StorageClasses.

const (
	betaStorageClassAnnotation  = "volume.beta.kubernetes.io/storage-class"
	maxProvisionerParameterSize = 256 * (1 << 10)
	maxProvisionerParameterLen  = 512
)

var supportedAccessModes = sets.New(corev1.ReadWriteOnce, corev1.ReadOnlyMany, corev1.ReadWriteMany, corev1.ReadWriteOncePod)

var supportedVolumeModes = sets.New(corev1.PersistentVolumeBlock, corev1.PersistentVolumeFilesystem)

func validateAccessModes(modes []corev1.PersistentVolumeAccessMode, requiredMsg string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(modes) == 0 {
		errs = append(errs, field.Required(fldPath, requiredMsg))
	}
	rwop, other := false, false
	for _, m := range modes {
		if !supportedAccessModes.Has(m) {
			errs = append(errs, field.NotSupported(fldPath, m, sets.List(supportedAccessModes)))
		}
		if m == corev1.ReadWriteOncePod {
			rwop = true
		} else if supportedAccessModes.Has(m) {
			other = true
		}
	}
	if rwop && other {
		errs = append(errs, field.Forbidden(fldPath, "may not use ReadWriteOncePod with other access modes"))
	}
	return errs
}

func validatePersistentVolume(pv *corev1.PersistentVolume) field.ErrorList {
	errs := validateMeta(&pv.ObjectMeta, false, nameIsDNSSubdomain)
	s, sp := &pv.Spec, specPath
	errs = append(errs, validateAccessModes(s.AccessModes, "", sp.Child("accessModes"))...)
	if len(s.Capacity) == 0 {
		errs = append(errs, field.Required(sp.Child("capacity"), ""))
	}
	if _, ok := s.Capacity[corev1.ResourceStorage]; !ok || len(s.Capacity) > 1 {
		errs = append(errs, field.NotSupported(sp.Child("capacity"), s.Capacity, []corev1.ResourceName{corev1.ResourceStorage}))
	}
	for _, k := range sortedResourceNames(s.Capacity) {
		errs = append(errs, validateBasicResource(s.Capacity[k], sp.Child("capacity").Key(string(k)))...)
		errs = append(errs, validatePositiveQuantity(s.Capacity[k], sp.Child("capacity").Key(string(k)))...)
	}
	if rp := s.PersistentVolumeReclaimPolicy; rp != "" {
		valid := []corev1.PersistentVolumeReclaimPolicy{corev1.PersistentVolumeReclaimDelete, corev1.PersistentVolumeReclaimRecycle, corev1.PersistentVolumeReclaimRetain}
		if !sets.New(valid...).Has(rp) {
			errs = append(errs, field.NotSupported(sp.Child("persistentVolumeReclaimPolicy"), rp, valid))
		}
	}
	nodeAffinity := false
	if s.NodeAffinity != nil {
		if r := s.NodeAffinity.Required; r != nil {
			nodeAffinity = true
			errs = append(errs, validateNodeSelector(r, false, sp.Child("nodeAffinity", "required"))...)
		} else {
			errs = append(errs, field.Required(sp.Child("nodeAffinity", "required"), "must specify required node constraints"))
		}
	}
	errs = append(errs, validatePersistentVolumeSource(&s.PersistentVolumeSource, nodeAffinity, sp)...)
	if s.HostPath != nil && path.Clean(s.HostPath.Path) == "/" && s.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimRecycle {
		errs = append(errs, field.Forbidden(sp.Child("persistentVolumeReclaimPolicy"), "may not be 'recycle' for a hostPath mount of '/'"))
	}
	if s.StorageClassName != "" {
		errs = append(errs, validateName(s.StorageClassName, nameIsDNSSubdomain, sp.Child("storageClassName"))...)
	}
	if s.VolumeMode != nil && !supportedVolumeModes.Has(*s.VolumeMode) {
		errs = append(errs, field.NotSupported(sp.Child("volumeMode"), *s.VolumeMode, sets.List(supportedVolumeModes)))
	}
	return errs
}

// validatePersistentVolumeSource checks that exactly one source is set and
// validates the kinds isle can serve; the others are only counted.
func validatePersistentVolumeSource(s *corev1.PersistentVolumeSource, nodeAffinity bool, fldPath *field.Path) field.ErrorList {
	none := func(*field.Path) field.ErrorList { return nil }
	checks := []volumeSourceCheck{
		{"hostPath", s.HostPath != nil, func(p *field.Path) field.ErrorList { return validateHostPath(s.HostPath, p) }},
		{"gcePersistentDisk", s.GCEPersistentDisk != nil, none},
		{"awsElasticBlockStore", s.AWSElasticBlockStore != nil, none},
		{"glusterfs", s.Glusterfs != nil, none},
		{"flocker", s.Flocker != nil, none},
		{"nfs", s.NFS != nil, func(p *field.Path) field.ErrorList {
			errs := requiredString(s.NFS.Server, p.Child("server"))
			errs = append(errs, requiredString(s.NFS.Path, p.Child("path"))...)
			if !path.IsAbs(s.NFS.Path) {
				errs = append(errs, field.Invalid(p.Child("path"), s.NFS.Path, "must be an absolute path"))
			}
			return errs
		}},
		{"rbd", s.RBD != nil, none},
		{"quobyte", s.Quobyte != nil, none},
		{"cephFS", s.CephFS != nil, none},
		{"iscsi", s.ISCSI != nil, none},
		{"cinder", s.Cinder != nil, none},
		{"fc", s.FC != nil, none},
		{"flexVolume", s.FlexVolume != nil, none},
		{"azureFile", s.AzureFile != nil, none},
		{"vsphereVolume", s.VsphereVolume != nil, none},
		{"photonPersistentDisk", s.PhotonPersistentDisk != nil, none},
		{"portworxVolume", s.PortworxVolume != nil, none},
		{"azureDisk", s.AzureDisk != nil, none},
		{"scaleIO", s.ScaleIO != nil, none},
		{"local", s.Local != nil, func(p *field.Path) field.ErrorList {
			var errs field.ErrorList
			if s.Local.Path == "" {
				errs = append(errs, field.Required(p.Child("path"), ""))
			} else {
				errs = append(errs, validatePathNoBacksteps(s.Local.Path, p.Child("path"))...)
			}
			if !nodeAffinity {
				errs = append(errs, field.Required(fldPath.Child("nodeAffinity"), "Local volume requires node affinity"))
			}
			return errs
		}},
		{"storageos", s.StorageOS != nil, none},
		{"csi", s.CSI != nil, func(p *field.Path) field.ErrorList {
			errs := validateCSIDriverName(s.CSI.Driver, p.Child("driver"))
			return append(errs, requiredString(s.CSI.VolumeHandle, p.Child("volumeHandle"))...)
		}},
	}
	var errs field.ErrorList
	n := 0
	for _, c := range checks {
		if !c.set {
			continue
		}
		if n > 0 {
			errs = append(errs, field.Forbidden(fldPath.Child(c.name), "may not specify more than 1 volume type"))
			continue
		}
		n++
		errs = append(errs, c.check(fldPath.Child(c.name))...)
	}
	if n == 0 {
		errs = append(errs, field.Required(fldPath, "must specify a volume type"))
	}
	return errs
}

// validatePersistentVolumeUpdate: the volume source and mode never change;
// node affinity only from beta to GA labels (here: not at all).
func validatePersistentVolumeUpdate(pv, old *corev1.PersistentVolume) field.ErrorList {
	errs := validatePersistentVolume(pv)
	errs = append(errs, validateMetaUpdate(&pv.ObjectMeta, &old.ObjectMeta)...)
	newSrc := pv.Spec.PersistentVolumeSource
	if old.Spec.CSI != nil && old.Spec.CSI.ControllerExpandSecretRef == nil && newSrc.CSI != nil && newSrc.CSI.ControllerExpandSecretRef != nil {
		c := *newSrc.CSI
		c.ControllerExpandSecretRef = nil
		newSrc.CSI = &c
	}
	if !equality.Semantic.DeepEqual(newSrc, old.Spec.PersistentVolumeSource) {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "persistentvolumesource"),
			"spec.persistentvolumesource is immutable after creation\n"+specDiff(old.Spec.PersistentVolumeSource, newSrc)))
	}
	errs = append(errs, validateImmutable(pv.Spec.VolumeMode, old.Spec.VolumeMode, field.NewPath("volumeMode"))...)
	if old.Spec.NodeAffinity != nil && !equality.Semantic.DeepEqual(pv.Spec.NodeAffinity, old.Spec.NodeAffinity) {
		errs = append(errs, field.Invalid(field.NewPath("nodeAffinity"), pv.Spec.NodeAffinity, fieldImmutable+", except for updating from beta label to GA"))
	}
	return errs
}

func validatePersistentVolumeStatus(pv, old *corev1.PersistentVolume) field.ErrorList {
	errs := validateMetaUpdate(&pv.ObjectMeta, &old.ObjectMeta)
	if pv.ResourceVersion == "" {
		errs = append(errs, field.Required(field.NewPath("resourceVersion"), ""))
	}
	return errs
}

func validatePersistentVolumeClaim(pvc *corev1.PersistentVolumeClaim) field.ErrorList {
	errs := validateMeta(&pvc.ObjectMeta, true, nameIsDNSSubdomain)
	return append(errs, validatePersistentVolumeClaimSpec(&pvc.Spec, specPath)...)
}

func validatePersistentVolumeClaimSpec(s *corev1.PersistentVolumeClaimSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(s.AccessModes) == 0 {
		errs = append(errs, field.Required(fldPath.Child("accessModes"), "at least 1 access mode is required"))
	}
	if s.Selector != nil {
		errs = append(errs, metavalidation.ValidateLabelSelector(s.Selector, labelSelectorStrict, fldPath.Child("selector"))...)
	}
	if len(s.AccessModes) > 0 {
		errs = append(errs, validateAccessModes(s.AccessModes, "", fldPath.Child("accessModes"))...)
	}
	sp := fldPath.Child("resources").Key(string(corev1.ResourceStorage))
	if q, ok := s.Resources.Requests[corev1.ResourceStorage]; !ok {
		errs = append(errs, field.Required(sp, ""))
	} else if e := validatePositiveQuantity(q, sp); len(e) > 0 {
		errs = append(errs, e...)
	} else {
		errs = append(errs, validateResourceQuantityValue(corev1.ResourceStorage, q, sp)...)
	}
	if s.StorageClassName != nil && *s.StorageClassName != "" {
		errs = append(errs, validateName(*s.StorageClassName, nameIsDNSSubdomain, fldPath.Child("storageClassName"))...)
	}
	if s.VolumeMode != nil && !supportedVolumeModes.Has(*s.VolumeMode) {
		errs = append(errs, field.NotSupported(fldPath.Child("volumeMode"), *s.VolumeMode, sets.List(supportedVolumeModes)))
	}
	if ds := s.DataSource; ds != nil {
		errs = append(errs, validateDataSource(ds.Name, ds.Kind, ds.APIGroup, fldPath.Child("dataSource"))...)
	}
	if ds := s.DataSourceRef; ds != nil {
		errs = append(errs, validateDataSource(ds.Name, ds.Kind, ds.APIGroup, fldPath.Child("dataSourceRef"))...)
		if ns := deref(ds.Namespace, ""); ns != "" {
			errs = append(errs, validateName(ns, nameIsDNSLabel, fldPath.Child("dataSourceRef", "namespace"))...)
			if s.DataSource != nil {
				errs = append(errs, field.Invalid(fldPath, fldPath.Child("dataSource"), "may not be specified when dataSourceRef.namespace is specified"))
			}
		} else if s.DataSource != nil && (!reflect.DeepEqual(s.DataSource.APIGroup, ds.APIGroup) || s.DataSource.Kind != ds.Kind || s.DataSource.Name != ds.Name) {
			errs = append(errs, field.Invalid(fldPath, fldPath.Child("dataSource"), "must match dataSourceRef"))
		}
	}
	return errs
}

func validateDataSource(name, kind string, apiGroup *string, fldPath *field.Path) field.ErrorList {
	errs := requiredString(name, fldPath.Child("name"))
	errs = append(errs, requiredString(kind, fldPath.Child("kind"))...)
	group := deref(apiGroup, "")
	if group == "" && kind != "PersistentVolumeClaim" {
		errs = append(errs, field.Invalid(fldPath, kind, "must be 'PersistentVolumeClaim' when referencing the default apiGroup"))
	}
	if group != "" {
		errs = append(errs, validateDNS1123Subdomain(group, fldPath.Child("apiGroup"))...)
	}
	return errs
}

// validatePersistentVolumeClaimUpdate: the spec is immutable except for a
// first volumeName and, for a bound claim, the storage request, which may
// grow, or shrink back to no less than the capacity the claim has.
func validatePersistentVolumeClaimUpdate(pvc, old *corev1.PersistentVolumeClaim) field.ErrorList {
	errs := validateMetaUpdate(&pvc.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validatePersistentVolumeClaim(pvc)...)
	newSpec, oldSpec := pvc.Spec.DeepCopy(), old.Spec.DeepCopy()
	if old.Spec.VolumeName == "" {
		oldSpec.VolumeName = newSpec.VolumeName
	}
	if validateStorageClassUpgrade(old, pvc) {
		newSpec.StorageClassName = oldSpec.StorageClassName
	} else {
		ov, nv := old.Annotations[betaStorageClassAnnotation], pvc.Annotations[betaStorageClassAnnotation]
		if ov != nv {
			errs = append(errs, field.Invalid(metadataPath.Child("annotations", betaStorageClassAnnotation), nv, fieldImmutable))
		}
		if newSpec.StorageClassName != nil && oldSpec.StorageClassName == nil {
			if oldAnn, ok := old.Annotations[betaStorageClassAnnotation]; !ok || *newSpec.StorageClassName == oldAnn {
				newSpec.StorageClassName = nil
			}
		}
	}
	if pvc.Status.Phase == corev1.ClaimBound && newSpec.Resources.Requests != nil {
		newSpec.Resources.Requests[corev1.ResourceStorage] = old.Spec.Resources.Requests[corev1.ResourceStorage]
	}
	if pvc.Status.Phase == corev1.ClaimBound && newSpec.VolumeAttributesClassName != nil {
		newSpec.VolumeAttributesClassName = oldSpec.VolumeAttributesClassName
	}
	if !equality.Semantic.DeepEqual(*newSpec, *oldSpec) {
		errs = append(errs, field.Forbidden(specPath, "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n"+specDiff(*oldSpec, *newSpec)))
	}
	oldSize, newSize := old.Spec.Resources.Requests[corev1.ResourceStorage], pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if newSize.Cmp(oldSize) < 0 {
		if statusSize := old.Status.Capacity[corev1.ResourceStorage]; newSize.Cmp(statusSize) <= 0 {
			errs = append(errs, field.Forbidden(specPath.Child("resources", "requests", "storage"), "field can not be less than status.capacity"))
		}
	}
	return append(errs, validateImmutable(pvc.Spec.VolumeMode, old.Spec.VolumeMode, field.NewPath("volumeMode"))...)
}

// validateStorageClassUpgrade allows moving the class from the beta
// annotation to storageClassName.
func validateStorageClassUpgrade(old, pvc *corev1.PersistentVolumeClaim) bool {
	oldSC, oldOK := old.Annotations[betaStorageClassAnnotation]
	newAnn, newOK := pvc.Annotations[betaStorageClassAnnotation]
	return oldOK && old.Spec.StorageClassName == nil && pvc.Spec.StorageClassName != nil &&
		*pvc.Spec.StorageClassName == oldSC && (!newOK || newAnn == oldSC)
}

func validatePersistentVolumeClaimStatus(pvc, old *corev1.PersistentVolumeClaim) field.ErrorList {
	errs := validateMetaUpdate(&pvc.ObjectMeta, &old.ObjectMeta)
	if pvc.ResourceVersion == "" {
		errs = append(errs, field.Required(field.NewPath("resourceVersion"), ""))
	}
	if len(pvc.Spec.AccessModes) == 0 {
		errs = append(errs, field.Required(field.NewPath("Spec", "accessModes"), ""))
	}
	for _, k := range sortedResourceNames(pvc.Status.Capacity) {
		errs = append(errs, validateBasicResource(pvc.Status.Capacity[k], field.NewPath("status", "capacity").Key(string(k)))...)
	}
	return errs
}

var supportedVolumeBindingModes = []storagev1.VolumeBindingMode{storagev1.VolumeBindingImmediate, storagev1.VolumeBindingWaitForFirstConsumer}

func validateStorageClass(sc *storagev1.StorageClass) field.ErrorList {
	errs := validateMeta(&sc.ObjectMeta, false, nameIsDNSSubdomain)
	pp := field.NewPath("provisioner")
	if sc.Provisioner == "" {
		errs = append(errs, field.Required(pp, sc.Provisioner))
	} else {
		errs = append(errs, validateQualifiedName(strings.ToLower(sc.Provisioner), pp)...)
	}
	errs = append(errs, validateProvisionerParameters(sc.Parameters, field.NewPath("parameters"))...)
	if rp := sc.ReclaimPolicy; rp != nil && *rp != "" && *rp != corev1.PersistentVolumeReclaimDelete && *rp != corev1.PersistentVolumeReclaimRetain {
		errs = append(errs, field.NotSupported(field.NewPath("reclaimPolicy"), rp,
			[]corev1.PersistentVolumeReclaimPolicy{corev1.PersistentVolumeReclaimDelete, corev1.PersistentVolumeReclaimRetain}))
	}
	mp := field.NewPath("volumeBindingMode")
	if m := sc.VolumeBindingMode; m == nil {
		errs = append(errs, field.Required(mp, ""))
	} else if *m != storagev1.VolumeBindingImmediate && *m != storagev1.VolumeBindingWaitForFirstConsumer {
		errs = append(errs, field.NotSupported(mp, m, supportedVolumeBindingModes))
	}
	for i, t := range sc.AllowedTopologies {
		for j, r := range t.MatchLabelExpressions {
			rp := field.NewPath("allowedTopologies").Index(i).Child("matchLabelExpressions").Index(j)
			if len(r.Values) == 0 {
				errs = append(errs, field.Required(rp.Child("values"), ""))
			}
			errs = append(errs, metavalidation.ValidateLabelName(r.Key, rp.Child("key"))...)
		}
	}
	return errs
}

func validateProvisionerParameters(params map[string]string, fldPath *field.Path) field.ErrorList {
	if len(params) > maxProvisionerParameterLen {
		return field.ErrorList{field.TooLong(fldPath, "", maxProvisionerParameterLen)}
	}
	var errs field.ErrorList
	total := 0
	for k, v := range params {
		if k == "" {
			errs = append(errs, field.Invalid(fldPath, k, "field can not be empty."))
		}
		total += len(k) + len(v)
	}
	if total > maxProvisionerParameterSize {
		errs = append(errs, field.TooLong(fldPath, "", maxProvisionerParameterSize))
	}
	return errs
}

// validateStorageClassUpdate: parameters, provisioner, reclaim policy and
// binding mode are fixed at creation.
func validateStorageClassUpdate(sc, old *storagev1.StorageClass) field.ErrorList {
	errs := validateMetaUpdate(&sc.ObjectMeta, &old.ObjectMeta)
	if !reflect.DeepEqual(old.Parameters, sc.Parameters) {
		errs = append(errs, field.Forbidden(field.NewPath("parameters"), "updates to parameters are forbidden."))
	}
	if sc.Provisioner != old.Provisioner {
		errs = append(errs, field.Forbidden(field.NewPath("provisioner"), "updates to provisioner are forbidden."))
	}
	errs = append(errs, validateImmutable(sc.ReclaimPolicy, old.ReclaimPolicy, field.NewPath("reclaimPolicy"))...)
	errs = append(errs, validateImmutable(sc.VolumeBindingMode, old.VolumeBindingMode, field.NewPath("volumeBindingMode"))...)
	return append(errs, validateStorageClass(sc)...)
}
