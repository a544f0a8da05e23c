package strategy

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validation of pod volumes and of the mounts that use them.

const fileModeErrorMsg = "must be a number between 0 and 0777 (octal), both inclusive"

var supportedHostPathTypes = sets.New(
	corev1.HostPathUnset, corev1.HostPathDirectoryOrCreate, corev1.HostPathDirectory,
	corev1.HostPathFileOrCreate, corev1.HostPathFile, corev1.HostPathSocket,
	corev1.HostPathCharDev, corev1.HostPathBlockDev)

// validateVolumes checks the pod's volumes and returns the valid ones by
// name, for the mounts.
func validateVolumes(volumes []corev1.Volume, podMeta *metav1.ObjectMeta, fldPath *field.Path) (map[string]corev1.VolumeSource, field.ErrorList) {
	var errs field.ErrorList
	names := sets.New[string]()
	created := sets.New[string]()
	if podMeta != nil && podMeta.Name != "" {
		for _, v := range volumes {
			if v.Ephemeral != nil {
				created.Insert(podMeta.Name + "-" + v.Name)
			}
		}
	}
	vols := make(map[string]corev1.VolumeSource, len(volumes))
	for i, v := range volumes {
		idx := fldPath.Index(i)
		namePath := idx.Child("name")
		el := validateVolumeSource(&v.VolumeSource, idx, v.Name, podMeta)
		if v.Name == "" {
			el = append(el, field.Required(namePath, ""))
		} else {
			el = append(el, validateDNS1123Label(v.Name, namePath)...)
		}
		if names.Has(v.Name) {
			el = append(el, field.Duplicate(namePath, v.Name))
		}
		if len(el) == 0 {
			names.Insert(v.Name)
			vols[v.Name] = v.VolumeSource
		} else {
			errs = append(errs, el...)
		}
		if v.PersistentVolumeClaim != nil && created.Has(v.PersistentVolumeClaim.ClaimName) {
			errs = append(errs, field.Invalid(idx.Child("persistentVolumeClaim", "claimName"), v.PersistentVolumeClaim.ClaimName,
				"must not reference a PVC that gets created for an ephemeral volume"))
		}
	}
	return vols, errs
}

// volumeSourceCheck is one kind of volume source: its field name, whether
// it is set and its own validation.
type volumeSourceCheck struct {
	name  string
	set   bool
	check func(*field.Path) field.ErrorList
}

// validateVolumeSource checks that exactly one source is set and validates
// it. Sources isle cannot mount are only counted.
func validateVolumeSource(s *corev1.VolumeSource, fldPath *field.Path, volName string, podMeta *metav1.ObjectMeta) field.ErrorList {
	none := func(*field.Path) field.ErrorList { return nil }
	checks := []volumeSourceCheck{
		{"emptyDir", s.EmptyDir != nil, func(p *field.Path) field.ErrorList {
			if sl := s.EmptyDir.SizeLimit; sl != nil && sl.Cmp(resource.Quantity{}) < 0 {
				return field.ErrorList{field.Forbidden(p.Child("sizeLimit"), "SizeLimit field must be a valid resource quantity")}
			}
			return nil
		}},
		{"hostPath", s.HostPath != nil, func(p *field.Path) field.ErrorList { return validateHostPath(s.HostPath, p) }},
		{"gitRepo", s.GitRepo != nil, none},
		{"gcePersistentDisk", s.GCEPersistentDisk != nil, none},
		{"awsElasticBlockStore", s.AWSElasticBlockStore != nil, none},
		{"secret", s.Secret != nil, func(p *field.Path) field.ErrorList {
			errs := requiredString(s.Secret.SecretName, p.Child("secretName"))
			errs = append(errs, validateFileMode(s.Secret.DefaultMode, p.Child("defaultMode"))...)
			return append(errs, validateKeyToPaths(s.Secret.Items, p.Child("items"))...)
		}},
		{"nfs", s.NFS != nil, func(p *field.Path) field.ErrorList {
			errs := requiredString(s.NFS.Server, p.Child("server"))
			errs = append(errs, requiredString(s.NFS.Path, p.Child("path"))...)
			if !path.IsAbs(s.NFS.Path) {
				errs = append(errs, field.Invalid(p.Child("path"), s.NFS.Path, "must be an absolute path"))
			}
			return errs
		}},
		{"iscsi", s.ISCSI != nil, none},
		{"glusterfs", s.Glusterfs != nil, none},
		{"flocker", s.Flocker != nil, none},
		{"persistentVolumeClaim", s.PersistentVolumeClaim != nil, func(p *field.Path) field.ErrorList {
			return requiredString(s.PersistentVolumeClaim.ClaimName, p.Child("claimName"))
		}},
		{"rbd", s.RBD != nil, none},
		{"cinder", s.Cinder != nil, none},
		{"cephFS", s.CephFS != nil, none},
		{"quobyte", s.Quobyte != nil, none},
		{"downwardAPI", s.DownwardAPI != nil, func(p *field.Path) field.ErrorList {
			errs := validateFileMode(s.DownwardAPI.DefaultMode, p.Child("defaultMode"))
			for _, f := range s.DownwardAPI.Items {
				errs = append(errs, validateDownwardAPIFile(&f, p)...)
			}
			return errs
		}},
		{"fc", s.FC != nil, none},
		{"flexVolume", s.FlexVolume != nil, none},
		{"configMap", s.ConfigMap != nil, func(p *field.Path) field.ErrorList {
			errs := requiredString(s.ConfigMap.Name, p.Child("name"))
			errs = append(errs, validateFileMode(s.ConfigMap.DefaultMode, p.Child("defaultMode"))...)
			return append(errs, validateKeyToPaths(s.ConfigMap.Items, p.Child("items"))...)
		}},
		{"azureFile", s.AzureFile != nil, none},
		{"vsphereVolume", s.VsphereVolume != nil, none},
		{"photonPersistentDisk", s.PhotonPersistentDisk != nil, none},
		{"portworxVolume", s.PortworxVolume != nil, none},
		{"azureDisk", s.AzureDisk != nil, none},
		{"storageos", s.StorageOS != nil, none},
		{"projected", s.Projected != nil, func(p *field.Path) field.ErrorList { return validateProjected(s.Projected, p) }},
		{"scaleIO", s.ScaleIO != nil, none},
		{"csi", s.CSI != nil, func(p *field.Path) field.ErrorList { return validateCSIDriverName(s.CSI.Driver, p.Child("driver")) }},
		{"ephemeral", s.Ephemeral != nil, func(p *field.Path) field.ErrorList {
			return validateEphemeral(s.Ephemeral, p, volName, podMeta, fldPath)
		}},
		{"image", s.Image != nil, func(p *field.Path) field.ErrorList {
			errs := validatePullPolicy(s.Image.PullPolicy, p.Child("pullPolicy"))
			if podMeta != nil && s.Image.Reference == "" {
				errs = append(field.ErrorList{field.Required(p.Child("reference"), "")}, errs...)
			}
			return errs
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

func requiredString(v string, fldPath *field.Path) field.ErrorList {
	if v == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	return nil
}

func validateHostPath(h *corev1.HostPathVolumeSource, fldPath *field.Path) field.ErrorList {
	if h.Path == "" {
		return field.ErrorList{field.Required(fldPath.Child("path"), "")}
	}
	errs := validatePathNoBacksteps(h.Path, fldPath.Child("path"))
	if h.Type != nil && !supportedHostPathTypes.Has(*h.Type) {
		errs = append(errs, field.NotSupported(fldPath.Child("type"), h.Type, sets.List(supportedHostPathTypes)))
	}
	return errs
}

func validateFileMode(mode *int32, fldPath *field.Path) field.ErrorList {
	if mode != nil && (*mode > 0777 || *mode < 0) {
		return field.ErrorList{field.Invalid(fldPath, *mode, fileModeErrorMsg)}
	}
	return nil
}

func validateKeyToPaths(items []corev1.KeyToPath, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, kp := range items {
		errs = append(errs, validateKeyToPath(&kp, fldPath.Index(i))...)
	}
	return errs
}

func validateKeyToPath(kp *corev1.KeyToPath, fldPath *field.Path) field.ErrorList {
	errs := requiredString(kp.Key, fldPath.Child("key"))
	errs = append(errs, requiredString(kp.Path, fldPath.Child("path"))...)
	errs = append(errs, validateLocalNonReservedPath(kp.Path, fldPath.Child("path"))...)
	return append(errs, validateFileMode(kp.Mode, fldPath.Child("mode"))...)
}

func validateDownwardAPIFile(f *corev1.DownwardAPIVolumeFile, fldPath *field.Path) field.ErrorList {
	errs := requiredString(f.Path, fldPath.Child("path"))
	errs = append(errs, validateLocalNonReservedPath(f.Path, fldPath.Child("path"))...)
	switch {
	case f.FieldRef != nil:
		errs = append(errs, validateObjectFieldSelector(f.FieldRef, validVolumeFieldPaths, fldPath.Child("fieldRef"))...)
		if f.ResourceFieldRef != nil {
			errs = append(errs, field.Invalid(fldPath, "resource", "fieldRef and resourceFieldRef can not be specified simultaneously"))
		}
	case f.ResourceFieldRef != nil:
		errs = append(errs, validateResourceFieldSelector(f.ResourceFieldRef, true, fldPath.Child("resourceFieldRef"))...)
	default:
		errs = append(errs, field.Required(fldPath, "one of fieldRef and resourceFieldRef is required"))
	}
	return append(errs, validateFileMode(f.Mode, fldPath.Child("mode"))...)
}

func validateProjected(p *corev1.ProjectedVolumeSource, fldPath *field.Path) field.ErrorList {
	errs := validateFileMode(p.DefaultMode, fldPath.Child("defaultMode"))
	paths := sets.New[string]()
	addPath := func(pth, badValue string) {
		if pth == "" {
			return
		}
		if paths.Has(pth) {
			errs = append(errs, field.Invalid(fldPath, badValue, "conflicting duplicate paths"))
		}
		paths.Insert(pth)
	}
	for i, src := range p.Sources {
		srcPath := fldPath.Child("sources").Index(i)
		n := 0
		if src.Secret != nil {
			n++
			errs = append(errs, requiredString(src.Secret.Name, srcPath.Child("secret", "name"))...)
			for j, kp := range src.Secret.Items {
				errs = append(errs, validateKeyToPath(&kp, srcPath.Child("secret", "items").Index(j))...)
				addPath(kp.Path, src.Secret.Name)
			}
		}
		if src.ConfigMap != nil {
			n++
			errs = append(errs, requiredString(src.ConfigMap.Name, srcPath.Child("configMap", "name"))...)
			for j, kp := range src.ConfigMap.Items {
				errs = append(errs, validateKeyToPath(&kp, srcPath.Child("configMap", "items").Index(j))...)
				addPath(kp.Path, src.ConfigMap.Name)
			}
		}
		if src.DownwardAPI != nil {
			n++
			for _, f := range src.DownwardAPI.Items {
				errs = append(errs, validateDownwardAPIFile(&f, srcPath.Child("downwardAPI"))...)
				addPath(f.Path, f.Path)
			}
		}
		if t := src.ServiceAccountToken; t != nil {
			n++
			tp := srcPath.Child("serviceAccountToken")
			exp := deref(t.ExpirationSeconds, 0)
			if exp < 10*60 {
				errs = append(errs, field.Invalid(tp.Child("expirationSeconds"), exp, "may not specify a duration less than 10 minutes"))
			}
			if exp > 1<<32 {
				errs = append(errs, field.Invalid(tp.Child("expirationSeconds"), exp, "may not specify a duration larger than 2^32 seconds"))
			}
			if t.Path == "" {
				errs = append(errs, field.Required(fldPath.Child("path"), ""))
			} else {
				errs = append(errs, validateLocalNonReservedPath(t.Path, fldPath.Child("path"))...)
			}
		}
		if src.ClusterTrustBundle != nil {
			n++
		}
		if n > 1 {
			errs = append(errs, field.Forbidden(srcPath, "may not specify more than 1 volume type per source"))
		}
	}
	return errs
}

func validateEphemeral(e *corev1.EphemeralVolumeSource, fldPath *field.Path, volName string, podMeta *metav1.ObjectMeta, volPath *field.Path) field.ErrorList {
	if e.VolumeClaimTemplate == nil {
		return field.ErrorList{field.Required(fldPath.Child("volumeClaimTemplate"), "")}
	}
	tp := fldPath.Child("volumeClaimTemplate")
	errs := validateTemplateMeta(&e.VolumeClaimTemplate.ObjectMeta, tp.Child("metadata"))
	errs = append(errs, validatePersistentVolumeClaimSpec(&e.VolumeClaimTemplate.Spec, tp.Child("spec"))...)
	if podMeta != nil && podMeta.Name != "" && volName != "" {
		pvcName := podMeta.Name + "-" + volName
		for _, msg := range nameIsDNSSubdomain(pvcName, false) {
			errs = append(errs, field.Invalid(volPath.Child("name"), volName, fmt.Sprintf("PVC name %q: %v", pvcName, msg)))
		}
	}
	return errs
}

// validateCSIDriverName checks a CSI driver name.
func validateCSIDriverName(name string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if name == "" {
		errs = append(errs, field.Required(fldPath, ""))
	}
	if len(name) > 63 {
		errs = append(errs, field.TooLong(fldPath, "", 63))
	}
	return append(errs, validateDNS1123Subdomain(strings.ToLower(name), fldPath)...)
}

// Paths inside volumes.

func validateLocalDescendingPath(p string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if path.IsAbs(p) {
		errs = append(errs, field.Invalid(fldPath, p, "must be a relative path"))
	}
	return append(errs, validatePathNoBacksteps(p, fldPath)...)
}

func validatePathNoBacksteps(p string, fldPath *field.Path) field.ErrorList {
	for _, part := range strings.Split(filepath.ToSlash(p), "/") {
		if part == ".." {
			return field.ErrorList{field.Invalid(fldPath, p, "must not contain '..'")}
		}
	}
	return nil
}

func validateLocalNonReservedPath(p string, fldPath *field.Path) field.ErrorList {
	errs := validateLocalDescendingPath(p, fldPath)
	if strings.HasPrefix(p, "..") && !strings.HasPrefix(p, "../") {
		errs = append(errs, field.Invalid(fldPath, p, "must not start with '..'"))
	}
	return errs
}

// Mounts.

func validateVolumeMounts(mounts []corev1.VolumeMount, devices map[string]string, vols map[string]corev1.VolumeSource, c *corev1.Container, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	points := sets.New[string]()
	for i, m := range mounts {
		idx := fldPath.Index(i)
		if m.Name == "" {
			errs = append(errs, field.Required(idx.Child("name"), ""))
		}
		if _, ok := vols[m.Name]; !ok {
			errs = append(errs, field.NotFound(idx.Child("name"), m.Name))
		}
		if m.MountPath == "" {
			errs = append(errs, field.Required(idx.Child("mountPath"), ""))
		}
		if points.Has(m.MountPath) {
			errs = append(errs, field.Invalid(idx.Child("mountPath"), m.MountPath, "must be unique"))
		}
		points.Insert(m.MountPath)
		if _, ok := devices[m.Name]; ok {
			errs = append(errs, field.Invalid(idx.Child("name"), m.Name, "must not already exist in volumeDevices"))
		}
		for _, d := range devices {
			if d == m.MountPath {
				errs = append(errs, field.Invalid(idx.Child("mountPath"), m.MountPath, "must not already exist as a path in volumeDevices"))
				break
			}
		}
		if v, ok := vols[m.Name]; ok && v.Image != nil {
			if m.SubPath != "" {
				errs = append(errs, field.Invalid(idx.Child("subPath"), m.SubPath, "not allowed in image volume sources"))
			}
			if m.SubPathExpr != "" {
				errs = append(errs, field.Invalid(idx.Child("subPathExpr"), m.SubPathExpr, "not allowed in image volume sources"))
			}
		}
		if m.SubPath != "" {
			errs = append(errs, validateLocalDescendingPath(m.SubPath, fldPath.Child("subPath"))...)
		}
		if m.SubPathExpr != "" {
			if m.SubPath != "" {
				errs = append(errs, field.Invalid(idx.Child("subPathExpr"), m.SubPathExpr, "subPathExpr and subPath are mutually exclusive"))
			}
			errs = append(errs, validateLocalDescendingPath(m.SubPathExpr, fldPath.Child("subPathExpr"))...)
		}
		errs = append(errs, validateMountPropagation(m.MountPropagation, c, fldPath.Child("mountPropagation"))...)
		errs = append(errs, validateRecursiveReadOnly(m, fldPath.Child("recursiveReadOnly"))...)
	}
	return errs
}

func validateMountPropagation(mp *corev1.MountPropagationMode, c *corev1.Container, fldPath *field.Path) field.ErrorList {
	if mp == nil {
		return nil
	}
	var errs field.ErrorList
	supported := sets.New(corev1.MountPropagationBidirectional, corev1.MountPropagationHostToContainer, corev1.MountPropagationNone)
	if !supported.Has(*mp) {
		errs = append(errs, field.NotSupported(fldPath, *mp, sets.List(supported)))
	}
	privileged := c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged
	if *mp == corev1.MountPropagationBidirectional && !privileged {
		errs = append(errs, field.Forbidden(fldPath, "Bidirectional mount propagation is available only to privileged containers"))
	}
	return errs
}

func validateRecursiveReadOnly(m corev1.VolumeMount, fldPath *field.Path) field.ErrorList {
	if m.RecursiveReadOnly == nil {
		return nil
	}
	var errs field.ErrorList
	switch *m.RecursiveReadOnly {
	case corev1.RecursiveReadOnlyDisabled:
	case corev1.RecursiveReadOnlyEnabled, corev1.RecursiveReadOnlyIfPossible:
		if !m.ReadOnly {
			errs = append(errs, field.Forbidden(fldPath, "may only be specified when readOnly is true"))
		}
		if m.MountPropagation != nil && *m.MountPropagation != corev1.MountPropagationNone {
			errs = append(errs, field.Forbidden(fldPath, "may only be specified when mountPropagation is None or not specified"))
		}
	default:
		errs = append(errs, field.NotSupported(fldPath, *m.RecursiveReadOnly,
			[]corev1.RecursiveReadOnlyMode{corev1.RecursiveReadOnlyDisabled, corev1.RecursiveReadOnlyIfPossible, corev1.RecursiveReadOnlyEnabled}))
	}
	return errs
}

func validateVolumeDevices(devices []corev1.VolumeDevice, mounts map[string]string, vols map[string]corev1.VolumeSource, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	paths, names := sets.New[string](), sets.New[string]()
	for i, d := range devices {
		idx := fldPath.Index(i)
		src, matched := vols[d.Name]
		isPVC := matched && (src.PersistentVolumeClaim != nil || src.Ephemeral != nil)
		if d.Name == "" {
			errs = append(errs, field.Required(idx.Child("name"), ""))
		}
		if names.Has(d.Name) {
			errs = append(errs, field.Invalid(idx.Child("name"), d.Name, "must be unique"))
		}
		if matched && !isPVC {
			errs = append(errs, field.Invalid(idx.Child("name"), d.Name, "can only use volume source type of PersistentVolumeClaim or Ephemeral for block mode"))
		}
		if !matched {
			errs = append(errs, field.NotFound(idx.Child("name"), d.Name))
		}
		if d.DevicePath == "" {
			errs = append(errs, field.Required(idx.Child("devicePath"), ""))
		}
		if paths.Has(d.DevicePath) {
			errs = append(errs, field.Invalid(idx.Child("devicePath"), d.DevicePath, "must be unique"))
		}
		if d.DevicePath != "" && len(validatePathNoBacksteps(d.DevicePath, nil)) > 0 {
			errs = append(errs, field.Invalid(idx.Child("devicePath"), d.DevicePath, "can not contain backsteps ('..')"))
		} else {
			paths.Insert(d.DevicePath)
		}
		if _, ok := mounts[d.Name]; ok {
			errs = append(errs, field.Invalid(idx.Child("name"), d.Name, "must not already exist in volumeMounts"))
		}
		for _, mp := range mounts {
			if mp == d.DevicePath {
				errs = append(errs, field.Invalid(idx.Child("devicePath"), d.DevicePath, "must not already exist as a path in volumeMounts"))
				break
			}
		}
		if d.Name != "" {
			names.Insert(d.Name)
		}
	}
	return errs
}
