package strategy

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validation of batch/v1 Jobs.

// The labels Kubernetes generates for a Job's pods (with the legacy,
// unprefixed copies it still writes).
const (
	legacyJobNameLabel       = "job-name"
	legacyControllerUIDLabel = "controller-uid"
)

const maxParallelismForIndexedJob = 100000

// generateJobSelector is Kubernetes' selector generation for Jobs that do
// not ask for a manual selector: the template gets the job-name and
// controller-uid labels (both forms) and the selector the controller uid.
func generateJobSelector(j *batchv1.Job) {
	if j.Spec.ManualSelector != nil && *j.Spec.ManualSelector {
		return
	}
	if j.Spec.Template.Labels == nil {
		j.Spec.Template.Labels = map[string]string{}
	}
	for _, k := range []string{legacyJobNameLabel, batchv1.JobNameLabel} {
		if _, ok := j.Spec.Template.Labels[k]; !ok {
			j.Spec.Template.Labels[k] = j.Name
		}
	}
	for _, k := range []string{legacyControllerUIDLabel, batchv1.ControllerUidLabel} {
		if _, ok := j.Spec.Template.Labels[k]; !ok {
			j.Spec.Template.Labels[k] = string(j.UID)
		}
	}
	if j.Spec.Selector == nil {
		j.Spec.Selector = &metav1.LabelSelector{}
	}
	if j.Spec.Selector.MatchLabels == nil {
		j.Spec.Selector.MatchLabels = map[string]string{}
	}
	if _, ok := j.Spec.Selector.MatchLabels[batchv1.ControllerUidLabel]; !ok {
		j.Spec.Selector.MatchLabels[batchv1.ControllerUidLabel] = string(j.UID)
	}
}

// validateJobCreate generates the selector (see ValidateCreate) and
// validates the Job.
func validateJobCreate(j *batchv1.Job) field.ErrorList {
	generateJobSelector(j)
	jobLabelsFromTemplate(j)
	return validateJob(j, true)
}

func validateJob(j *batchv1.Job, prefixedLabels bool) field.ErrorList {
	errs := validateMeta(&j.ObjectMeta, true, nameIsDNSSubdomain)
	errs = append(errs, validateGeneratedSelector(j, prefixedLabels)...)
	errs = append(errs, validateJobSpec(&j.Spec, specPath)...)
	errs = append(errs, validateJobSelector(&j.Spec, specPath)...)
	if deref(j.Spec.CompletionMode, batchv1.NonIndexedCompletion) == batchv1.IndexedCompletion && deref(j.Spec.Completions, 0) > 0 {
		host := fmt.Sprintf("%s-%d", j.Name, *j.Spec.Completions-1)
		if msgs := validation.IsDNS1123Label(host); len(msgs) > 0 {
			errs = append(errs, field.Invalid(metadataPath.Child("name"), j.Name, fmt.Sprintf("will not able to create pod with invalid DNS label: %s", host)))
		}
	}
	return errs
}

// validateGeneratedSelector checks that a generated selector and the
// template's labels are the ones generated for this Job.
func validateGeneratedSelector(j *batchv1.Job, prefixedLabels bool) field.ErrorList {
	if deref(j.Spec.ManualSelector, false) || j.Spec.Selector == nil {
		return nil
	}
	var errs field.ErrorList
	if j.UID == "" {
		errs = append(errs, field.Required(metadataPath.Child("uid"), ""))
	}
	tp := specPath.Child("template", "metadata")
	want := []struct{ key, value string }{{legacyControllerUIDLabel, string(j.UID)}, {legacyJobNameLabel, j.Name}}
	if prefixedLabels {
		want = append(want, struct{ key, value string }{batchv1.ControllerUidLabel, string(j.UID)}, struct{ key, value string }{batchv1.JobNameLabel, j.Name})
	}
	expected := labels.Set{}
	for _, w := range want {
		expected[w.key] = w.value
		v, ok := j.Spec.Template.Labels[w.key]
		switch {
		case !ok:
			errs = append(errs, field.Required(tp.Child("labels").Key(w.key), fmt.Sprintf("must be '%s'", w.value)))
		case v != w.value:
			errs = append(errs, field.Invalid(tp.Child("labels").Key(w.key), j.Spec.Template.Labels, fmt.Sprintf("must be '%s'", w.value)))
		}
	}
	if sel, err := metav1.LabelSelectorAsSelector(j.Spec.Selector); err == nil && !sel.Matches(expected) {
		errs = append(errs, field.Invalid(specPath.Child("selector"), j.Spec.Selector, "`selector` not auto-generated"))
	}
	return errs
}

func validateJobSpec(s *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, f := range []struct {
		name string
		v    *int32
	}{{"parallelism", s.Parallelism}, {"completions", s.Completions}, {"backoffLimit", s.BackoffLimit},
		{"ttlSecondsAfterFinished", s.TTLSecondsAfterFinished}, {"backoffLimitPerIndex", s.BackoffLimitPerIndex}} {
		if f.v != nil {
			errs = append(errs, validateNonnegative(int64(*f.v), fldPath.Child(f.name))...)
		}
	}
	if s.ActiveDeadlineSeconds != nil {
		errs = append(errs, validateNonnegative(*s.ActiveDeadlineSeconds, fldPath.Child("activeDeadlineSeconds"))...)
	}
	if s.MaxFailedIndexes != nil {
		errs = append(errs, validateNonnegative(int64(*s.MaxFailedIndexes), fldPath.Child("maxFailedIndexes"))...)
		if s.BackoffLimitPerIndex == nil {
			errs = append(errs, field.Required(fldPath.Child("backoffLimitPerIndex"), "when maxFailedIndexes is specified"))
		}
	}
	indexed := deref(s.CompletionMode, batchv1.NonIndexedCompletion) == batchv1.IndexedCompletion
	if m := s.CompletionMode; m != nil {
		if *m != batchv1.NonIndexedCompletion && *m != batchv1.IndexedCompletion {
			errs = append(errs, field.NotSupported(fldPath.Child("completionMode"), m, []batchv1.CompletionMode{batchv1.NonIndexedCompletion, batchv1.IndexedCompletion}))
		}
		if indexed {
			if s.Completions == nil {
				errs = append(errs, field.Required(fldPath.Child("completions"), fmt.Sprintf("when completion mode is %s", batchv1.IndexedCompletion)))
			}
			if s.Parallelism != nil && *s.Parallelism > maxParallelismForIndexedJob {
				errs = append(errs, field.Invalid(fldPath.Child("parallelism"), *s.Parallelism,
					fmt.Sprintf("must be less than or equal to %d when completion mode is %s", maxParallelismForIndexedJob, batchv1.IndexedCompletion)))
			}
		}
	}
	if !indexed {
		if s.BackoffLimitPerIndex != nil {
			errs = append(errs, field.Invalid(fldPath.Child("backoffLimitPerIndex"), *s.BackoffLimitPerIndex, "requires indexed completion mode"))
		}
		if s.MaxFailedIndexes != nil {
			errs = append(errs, field.Invalid(fldPath.Child("maxFailedIndexes"), *s.MaxFailedIndexes, "requires indexed completion mode"))
		}
	}
	if s.PodReplacementPolicy != nil {
		if s.PodFailurePolicy != nil && *s.PodReplacementPolicy != batchv1.Failed {
			errs = append(errs, field.NotSupported(fldPath.Child("podReplacementPolicy"), *s.PodReplacementPolicy, []batchv1.PodReplacementPolicy{batchv1.Failed}))
		} else if p := *s.PodReplacementPolicy; p != batchv1.Failed && p != batchv1.TerminatingOrFailed {
			errs = append(errs, field.NotSupported(fldPath.Child("podReplacementPolicy"), p, []batchv1.PodReplacementPolicy{batchv1.Failed, batchv1.TerminatingOrFailed}))
		}
	}
	errs = append(errs, validatePodTemplateSpec(&s.Template, fldPath.Child("template"))...)
	rp, rpPath := s.Template.Spec.RestartPolicy, fldPath.Child("template", "spec", "restartPolicy")
	switch {
	case rp == corev1.RestartPolicyAlways || rp == "":
		errs = append(errs, field.Required(rpPath, fmt.Sprintf("valid values: %q, %q", corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever)))
	case rp != corev1.RestartPolicyOnFailure && rp != corev1.RestartPolicyNever:
		errs = append(errs, field.NotSupported(rpPath, rp, []corev1.RestartPolicy{corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever}))
	case s.PodFailurePolicy != nil && rp != corev1.RestartPolicyNever:
		errs = append(errs, field.Invalid(rpPath, rp, fmt.Sprintf("only %q is supported when podFailurePolicy is specified", corev1.RestartPolicyNever)))
	}
	return errs
}

// validateJobSelector: a Job's selector is required and matches its
// template (a CronJob's job template has none: it is generated).
func validateJobSelector(s *batchv1.JobSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Selector == nil {
		errs = append(errs, field.Required(fldPath.Child("selector"), ""))
	} else {
		errs = append(errs, metavalidation.ValidateLabelSelector(s.Selector, labelSelectorStrict, fldPath.Child("selector"))...)
	}
	if sel, err := metav1.LabelSelectorAsSelector(s.Selector); err == nil && !sel.Matches(labels.Set(s.Template.Labels)) {
		errs = append(errs, field.Invalid(fldPath.Child("template", "metadata", "labels"), s.Template.Labels, selectorMismatch))
	}
	return errs
}

// validateJobUpdate: the selector, completion mode, pod failure policy and
// (for jobs that started or are not suspended) the template are immutable;
// completions too, except in step with parallelism for Indexed jobs.
func validateJobUpdate(j, old *batchv1.Job) field.ErrorList {
	_, hadName := old.Spec.Template.Labels[batchv1.JobNameLabel]
	_, hadUID := old.Spec.Template.Labels[batchv1.ControllerUidLabel]
	errs := validateJob(j, hadName && hadUID)
	errs = append(errs, validateMetaUpdate(&j.ObjectMeta, &old.ObjectMeta)...)
	s, os := &j.Spec, &old.Spec
	errs = append(errs, validateJobCompletionsUpdate(s, os)...)
	errs = append(errs, validateImmutable(s.Selector, os.Selector, specPath.Child("selector"))...)
	errs = append(errs, validateJobTemplateUpdate(j, old)...)
	errs = append(errs, validateImmutable(s.CompletionMode, os.CompletionMode, specPath.Child("completionMode"))...)
	errs = append(errs, validateImmutable(s.PodFailurePolicy, os.PodFailurePolicy, specPath.Child("podFailurePolicy"))...)
	errs = append(errs, validateImmutable(s.BackoffLimitPerIndex, os.BackoffLimitPerIndex, specPath.Child("backoffLimitPerIndex"))...)
	errs = append(errs, validateImmutable(s.ManagedBy, os.ManagedBy, specPath.Child("managedBy"))...)
	return append(errs, validateImmutable(s.SuccessPolicy, os.SuccessPolicy, specPath.Child("successPolicy"))...)
}

func validateJobCompletionsUpdate(s, old *batchv1.JobSpec) field.ErrorList {
	p := specPath.Child("completions")
	if deref(s.CompletionMode, batchv1.NonIndexedCompletion) != batchv1.IndexedCompletion {
		return validateImmutable(s.Completions, old.Completions, p)
	}
	if s.Completions == nil || (old.Completions != nil && *s.Completions == *old.Completions) {
		return nil
	}
	if *s.Completions != deref(s.Parallelism, 1) {
		return field.ErrorList{field.Invalid(p, s.Completions, "can only be modified in tandem with spec.parallelism")}
	}
	return nil
}

// validateJobTemplateUpdate: a suspended Job that never started may change
// its scheduling directives, labels and annotations; nothing else may.
func validateJobTemplateUpdate(j, old *batchv1.Job) field.ErrorList {
	oldT := old.Spec.Template.DeepCopy()
	t := &j.Spec.Template
	if deref(old.Spec.Suspend, false) && old.Status.StartTime == nil {
		switch {
		case t.Spec.Affinity == nil && oldT.Spec.Affinity != nil:
			oldT.Spec.Affinity.NodeAffinity = nil
			if *oldT.Spec.Affinity == (corev1.Affinity{}) {
				oldT.Spec.Affinity = nil
			}
		case t.Spec.Affinity != nil && oldT.Spec.Affinity == nil:
			oldT.Spec.Affinity = &corev1.Affinity{NodeAffinity: t.Spec.Affinity.NodeAffinity}
		case t.Spec.Affinity != nil && oldT.Spec.Affinity != nil:
			oldT.Spec.Affinity.NodeAffinity = t.Spec.Affinity.NodeAffinity
		}
		oldT.Spec.NodeSelector = t.Spec.NodeSelector
		oldT.Spec.Tolerations = t.Spec.Tolerations
		oldT.Annotations = t.Annotations
		oldT.Labels = t.Labels
		oldT.Spec.SchedulingGates = t.Spec.SchedulingGates
	}
	return validateImmutable(t, oldT, specPath.Child("template"))
}

func validateJobStatus(j, old *batchv1.Job) field.ErrorList {
	s, p := j.Status, field.NewPath("status")
	errs := validateMetaUpdate(&j.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, nonnegativeCounts(p, map[string]int32{"active": s.Active, "succeeded": s.Succeeded, "failed": s.Failed},
		"active", "succeeded", "failed")...)
	if s.Ready != nil {
		errs = append(errs, validateNonnegative(int64(*s.Ready), p.Child("ready"))...)
	}
	if s.Terminating != nil {
		errs = append(errs, validateNonnegative(int64(*s.Terminating), p.Child("terminating"))...)
	}
	if u := s.UncountedTerminatedPods; u != nil {
		up := p.Child("uncountedTerminatedPods")
		seen := sets.New[string]()
		for _, list := range []struct {
			name string
			uids []string
		}{{"succeeded", uidStrings(u.Succeeded)}, {"failed", uidStrings(u.Failed)}} {
			for i, uid := range list.uids {
				ip := up.Child(list.name).Index(i)
				switch {
				case uid == "":
					errs = append(errs, field.Invalid(ip, uid, "must not be empty"))
				case seen.Has(uid):
					errs = append(errs, field.Duplicate(ip, uid))
				default:
					seen.Insert(uid)
				}
			}
		}
	}
	return errs
}

func uidStrings[T ~string](uids []T) []string {
	out := make([]string, len(uids))
	for i, u := range uids {
		out[i] = string(u)
	}
	return out
}
