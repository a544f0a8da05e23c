package strategy

import (
	"fmt"
	"math"
	"net"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validation of Pods (create, update, status) and of pod templates.

const mirrorPodAnnotation = "kubernetes.io/config.mirror"

var specPath = field.NewPath("spec")

// updatablePodSpecFields is the list Kubernetes quotes when a pod update
// changes anything else.
var updatablePodSpecFields = []string{
	"`spec.containers[*].image`",
	"`spec.initContainers[*].image`",
	"`spec.activeDeadlineSeconds`",
	"`spec.tolerations` (only additions to existing tolerations)",
	"`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
}

// validatePodMetadataAndSpec is the validation shared by create and update.
func validatePodMetadataAndSpec(p *corev1.Pod) field.ErrorList {
	errs := validateMeta(&p.ObjectMeta, true, nameIsDNSSubdomain)
	errs = append(errs, validatePodAnnotations(p.Annotations, &p.Spec, metadataPath.Child("annotations"))...)
	errs = append(errs, validatePodSpec(&p.Spec, &p.ObjectMeta, specPath)...)
	if p.Spec.ServiceAccountName == "" {
		for vi, v := range p.Spec.Volumes {
			if v.Projected == nil {
				continue
			}
			for si, src := range v.Projected.Sources {
				if src.ServiceAccountToken != nil {
					errs = append(errs, field.Forbidden(specPath.Child("volumes").Index(vi).Child("projected", "sources").Index(si).Child("serviceAccountToken"),
						"must not be specified when serviceAccountName is not set"))
				}
			}
		}
	}
	for i := range p.Spec.Containers {
		errs = append(errs, validateImageWhitespace(&p.Spec.Containers[i], specPath.Child("containers").Index(i))...)
	}
	for i := range p.Spec.InitContainers {
		errs = append(errs, validateImageWhitespace(&p.Spec.InitContainers[i], specPath.Child("initContainers").Index(i))...)
	}
	return errs
}

// validatePodAnnotations checks the annotations Kubernetes gives meaning.
func validatePodAnnotations(a map[string]string, s *corev1.PodSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if v, ok := a[mirrorPodAnnotation]; ok && s.NodeName == "" {
		errs = append(errs, field.Invalid(fldPath.Key(mirrorPodAnnotation), v, "must set spec.nodeName if mirror pod annotation is set"))
	}
	if v, ok := a[corev1.PodDeletionCost]; ok {
		if _, err := parseInt32(v); err != nil {
			errs = append(errs, field.Invalid(fldPath.Key(corev1.PodDeletionCost), v, "must be a 32bit integer"))
		}
	}
	return errs
}

func validatePodCreate(p *corev1.Pod) field.ErrorList {
	errs := validatePodMetadataAndSpec(p)
	if len(p.Spec.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(specPath.Child("ephemeralContainers"), "cannot be set on create"))
	}
	if p.Spec.NodeName != "" && len(p.Spec.SchedulingGates) != 0 {
		errs = append(errs, field.Forbidden(specPath.Child("nodeName"), "cannot be set until all schedulingGates have been cleared"))
	}
	return errs
}

// validatePodUpdate allows only the mutable parts of a pod spec to change:
// images, activeDeadlineSeconds (lowered), added tolerations, removed
// scheduling gates and, for gated pods, added node selectors.
func validatePodUpdate(p, old *corev1.Pod) field.ErrorList {
	errs := validateMetaUpdate(&p.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validatePodMetadataAndSpec(p)...)
	errs = append(errs, validatePodAnnotationUpdates(p, old)...)
	for _, cs := range []struct {
		name     string
		new, old []corev1.Container
	}{{"containers", p.Spec.Containers, old.Spec.Containers}, {"initContainers", p.Spec.InitContainers, old.Spec.InitContainers}} {
		if len(cs.new) != len(cs.old) {
			return append(errs, field.Forbidden(specPath.Child(cs.name), "pod updates may not add or remove containers"))
		}
		for i, c := range cs.new {
			if c.Image == "" {
				errs = append(errs, field.Required(specPath.Child(cs.name).Index(i).Child("image"), ""))
			}
		}
	}
	if ads := p.Spec.ActiveDeadlineSeconds; ads != nil {
		if *ads < 0 || *ads > math.MaxInt32 {
			return append(errs, field.Invalid(specPath.Child("activeDeadlineSeconds"), *ads, validation.InclusiveRangeError(0, math.MaxInt32)))
		}
		if old.Spec.ActiveDeadlineSeconds != nil && *old.Spec.ActiveDeadlineSeconds < *ads {
			return append(errs, field.Invalid(specPath.Child("activeDeadlineSeconds"), *ads, "must be less than or equal to previous value"))
		}
	} else if old.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Invalid(specPath.Child("activeDeadlineSeconds"), p.Spec.ActiveDeadlineSeconds, "must not update from a positive integer to nil value"))
	}
	errs = append(errs, validateOnlyAddedTolerations(p.Spec.Tolerations, old.Spec.Tolerations, specPath.Child("tolerations"))...)
	errs = append(errs, validateOnlyDeletedSchedulingGates(p.Spec.SchedulingGates, old.Spec.SchedulingGates, specPath.Child("schedulingGates"))...)
	if equality.Semantic.DeepEqual(p.Spec, old.Spec) {
		return errs
	}
	munged := p.Spec.DeepCopy()
	for i := range munged.Containers {
		munged.Containers[i].Image = old.Spec.Containers[i].Image
	}
	for i := range munged.InitContainers {
		munged.InitContainers[i].Image = old.Spec.InitContainers[i].Image
	}
	munged.ActiveDeadlineSeconds = old.Spec.ActiveDeadlineSeconds
	munged.SchedulingGates = old.Spec.SchedulingGates
	munged.Tolerations = old.Spec.Tolerations
	if g := old.Spec.TerminationGracePeriodSeconds; g != nil && *g < 0 && munged.TerminationGracePeriodSeconds != nil && *munged.TerminationGracePeriodSeconds == 1 {
		munged.TerminationGracePeriodSeconds = g
	}
	if len(old.Spec.SchedulingGates) > 0 && !equality.Semantic.DeepEqual(munged.NodeSelector, old.Spec.NodeSelector) {
		for k, v := range old.Spec.NodeSelector {
			if nv, ok := munged.NodeSelector[k]; !ok || nv != v {
				errs = append(errs, field.Invalid(specPath.Child("nodeSelector"), munged.NodeSelector, "only additions to spec.nodeSelector are allowed (no mutations or deletions)"))
				break
			}
		}
		munged.NodeSelector = old.Spec.NodeSelector
	}
	if !equality.Semantic.DeepEqual(*munged, old.Spec) {
		errs = append(errs, field.Forbidden(specPath, fmt.Sprintf("pod updates may not change fields other than %s\n%s",
			strings.Join(updatablePodSpecFields, ","), specDiff(old.Spec, *munged))))
	}
	return errs
}

func validatePodAnnotationUpdates(p, old *corev1.Pod) field.ErrorList {
	var errs field.ErrorList
	ap := metadataPath.Child("annotations")
	if ov, ok := old.Annotations[mirrorPodAnnotation]; ok {
		if nv, ok := p.Annotations[mirrorPodAnnotation]; !ok || nv != ov {
			errs = append(errs, field.Forbidden(ap.Key(mirrorPodAnnotation), "may not remove or update mirror pod annotation"))
		}
	} else if _, ok := p.Annotations[mirrorPodAnnotation]; ok {
		errs = append(errs, field.Forbidden(ap.Key(mirrorPodAnnotation), "may not add mirror pod annotation"))
	}
	return errs
}

func validateOnlyAddedTolerations(ts, old []corev1.Toleration, fldPath *field.Path) field.ErrorList {
	for _, o := range old {
		found := false
		for _, t := range ts {
			oc := o
			oc.TolerationSeconds = t.TolerationSeconds
			if equality.Semantic.DeepEqual(oc, t) {
				found = true
				break
			}
		}
		if !found {
			return field.ErrorList{field.Forbidden(fldPath, "existing toleration can not be modified except its tolerationSeconds")}
		}
	}
	return validateTolerations(ts, fldPath)
}

func validateOnlyDeletedSchedulingGates(gates, old []corev1.PodSchedulingGate, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	oldNames := sets.New[string]()
	for _, g := range old {
		oldNames.Insert(g.Name)
	}
	for i, g := range gates {
		if !oldNames.Has(g.Name) {
			errs = append(errs, field.Forbidden(fldPath.Index(i).Child("name"), fmt.Sprintf("only deletion is allowed, but found new scheduling gate '%s'", g.Name)))
		}
	}
	return errs
}

// validatePodStatus checks a write to a pod's status.
func validatePodStatus(p, old *corev1.Pod) field.ErrorList {
	errs := validateMetaUpdate(&p.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validatePodAnnotationUpdates(p, old)...)
	for i, c := range p.Status.Conditions {
		switch c.Type {
		case corev1.PodScheduled, corev1.PodReady, corev1.PodInitialized:
		default:
			errs = append(errs, validateQualifiedName(string(c.Type), metadataPath.Child("conditions").Index(i).Child("Type"))...)
		}
	}
	sp := field.NewPath("status")
	if p.Spec.NodeName != old.Spec.NodeName {
		errs = append(errs, field.Forbidden(sp.Child("nodeName"), "may not be changed directly"))
	}
	if n := p.Status.NominatedNodeName; n != old.Status.NominatedNodeName && n != "" {
		errs = append(errs, validateName(n, nameIsDNSSubdomain, sp.Child("nominatedNodeName"))...)
	}
	errs = append(errs, validateImmutable(p.Status.QOSClass, old.Status.QOSClass, sp.Child("qosClass"))...)
	errs = append(errs, validateContainerStateTransition(p.Status.ContainerStatuses, old.Status.ContainerStatuses, sp.Child("containerStatuses"), old.Spec.RestartPolicy)...)
	errs = append(errs, validatePodIPs(p.Status.PodIPs, sp.Child("podIPs"))...)
	if len(p.Status.HostIPs) > 0 {
		hp := sp.Child("hostIPs")
		if p.Status.HostIP != p.Status.HostIPs[0].IP {
			errs = append(errs, field.Invalid(hp.Index(0).Child("ip"), p.Status.HostIPs[0].IP, "must be equal to `hostIP`"))
		}
		ips := make([]corev1.PodIP, len(p.Status.HostIPs))
		for i, h := range p.Status.HostIPs {
			ips[i] = corev1.PodIP(h)
		}
		errs = append(errs, validatePodIPs(ips, hp)...)
	}
	return errs
}

// validatePodIPs: valid addresses, at most one per family, no repeats.
func validatePodIPs(ips []corev1.PodIP, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, ip := range ips {
		errs = append(errs, validation.IsValidIP(fldPath.Index(i), ip.IP)...)
	}
	if len(ips) < 2 || len(errs) > 0 {
		return errs
	}
	fam0, _ := familyOf(ips[0].IP)
	fam1, _ := familyOf(ips[1].IP)
	if len(ips) > 2 || fam0 == fam1 {
		errs = append(errs, field.Invalid(fldPath, ips, "may specify no more than one IP for each IP family"))
	}
	seen := sets.New[string]()
	for i, ip := range ips {
		key := net.ParseIP(ip.IP).String()
		if seen.Has(key) {
			errs = append(errs, field.Duplicate(fldPath.Index(i), ip))
		}
		seen.Insert(key)
	}
	return errs
}

// validateContainerStateTransition: a terminated container of a pod that
// does not restart it may not come back.
func validateContainerStateTransition(statuses, old []corev1.ContainerStatus, fldPath *field.Path, rp corev1.RestartPolicy) field.ErrorList {
	if rp == corev1.RestartPolicyAlways {
		return nil
	}
	var errs field.ErrorList
	for i, o := range old {
		if o.State.Terminated == nil || (o.State.Terminated.ExitCode != 0 && rp == corev1.RestartPolicyOnFailure) {
			continue
		}
		for _, s := range statuses {
			if s.Name == o.Name && s.State.Terminated == nil {
				errs = append(errs, field.Forbidden(fldPath.Index(i).Child("state"), "may not be transitioned to non-terminated state"))
			}
		}
	}
	return errs
}

// validatePodTemplateSpec checks the pod template of a workload.
func validatePodTemplateSpec(t *corev1.PodTemplateSpec, fldPath *field.Path) field.ErrorList {
	errs := validateTemplateMeta(&t.ObjectMeta, fldPath)
	errs = append(errs, validatePodAnnotations(t.Annotations, &t.Spec, fldPath.Child("annotations"))...)
	errs = append(errs, validatePodSpec(&t.Spec, nil, fldPath.Child("spec"))...)
	if len(t.Spec.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(fldPath.Child("spec", "ephemeralContainers"), "ephemeral containers not allowed in pod template"))
	}
	return errs
}
