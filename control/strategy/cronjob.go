package strategy

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// CronJob is the strategy of batch/v1 CronJobs.
var CronJob = &Kind[*batchv1.CronJob]{namespaced: true, defaults: defaultCronJob, create: validateCronJobCreate,
	update: validateCronJobUpdate, status: validateCronJobStatus}

func defaultCronJob(c *batchv1.CronJob) {
	s := &c.Spec
	if s.ConcurrencyPolicy == "" {
		s.ConcurrencyPolicy = batchv1.AllowConcurrent
	}
	if s.Suspend == nil {
		s.Suspend = ptrTo(false)
	}
	if s.SuccessfulJobsHistoryLimit == nil {
		s.SuccessfulJobsHistoryLimit = ptrTo(int32(3))
	}
	if s.FailedJobsHistoryLimit == nil {
		s.FailedJobsHistoryLimit = ptrTo(int32(1))
	}
	// The job template's defaults, but its selector: the Job gets one.
	j := &batchv1.Job{Spec: s.JobTemplate.Spec}
	defaultJob(j)
	s.JobTemplate.Spec = j.Spec
}

// cronJobMaxName leaves room in a Job's name (63 characters) for the
// controller's suffix of 11.
const cronJobMaxName = 52

func validateCronJobCreate(c *batchv1.CronJob) field.ErrorList {
	errs := validateMeta(&c.ObjectMeta, true, nameIsDNSSubdomain)
	errs = append(errs, validateCronJobSpec(&c.Spec, nil)...)
	if len(c.Name) > cronJobMaxName {
		errs = append(errs, field.Invalid(metadataPath.Child("name"), c.Name, fmt.Sprintf("must be no more than %d characters", cronJobMaxName)))
	}
	return errs
}

func validateCronJobUpdate(c, old *batchv1.CronJob) field.ErrorList {
	errs := validateMetaUpdate(&c.ObjectMeta, &old.ObjectMeta)
	errs = append(errs, validateCronJobSpec(&c.Spec, &old.Spec)...)
	// The job template's selector stays unset, its template may change.
	return errs
}

var concurrencyPolicies = []batchv1.ConcurrencyPolicy{batchv1.AllowConcurrent, batchv1.ForbidConcurrent, batchv1.ReplaceConcurrent}

// validateCronJobSpec checks a spec as upstream does; old is nil on
// create (a TZ= in the schedule is then refused: timeZone says it).
func validateCronJobSpec(s, old *batchv1.CronJobSpec) field.ErrorList {
	var errs field.ErrorList
	sp := specPath.Child("schedule")
	if s.Schedule == "" {
		errs = append(errs, field.Required(sp, ""))
	} else {
		if _, err := cron.ParseStandard(s.Schedule); err != nil {
			errs = append(errs, field.Invalid(sp, s.Schedule, err.Error()))
		}
		tzBefore := old != nil && strings.Contains(old.Schedule, "TZ")
		switch {
		case tzBefore && strings.Contains(s.Schedule, "TZ") && s.TimeZone != nil:
			errs = append(errs, field.Invalid(sp, s.Schedule, "cannot use both timeZone field and TZ or CRON_TZ in schedule"))
		case !tzBefore && strings.Contains(s.Schedule, "TZ"):
			errs = append(errs, field.Invalid(sp, s.Schedule, "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"))
		}
	}
	if s.StartingDeadlineSeconds != nil {
		errs = append(errs, validateNonnegative(*s.StartingDeadlineSeconds, specPath.Child("startingDeadlineSeconds"))...)
	}
	if old == nil || deref(old.TimeZone, "\x00") != deref(s.TimeZone, "\x00") {
		errs = append(errs, validateTimeZone(s.TimeZone, specPath.Child("timeZone"))...)
	}
	switch p := s.ConcurrencyPolicy; p {
	case "":
		errs = append(errs, field.Required(specPath.Child("concurrencyPolicy"), ""))
	case batchv1.AllowConcurrent, batchv1.ForbidConcurrent, batchv1.ReplaceConcurrent:
	default:
		errs = append(errs, field.NotSupported(specPath.Child("concurrencyPolicy"), p, concurrencyPolicies))
	}
	jp := specPath.Child("jobTemplate")
	errs = append(errs, validateTemplateMeta(&s.JobTemplate.ObjectMeta, jp.Child("metadata"))...)
	js := &s.JobTemplate.Spec
	errs = append(errs, validateJobSpec(js, jp.Child("spec"))...)
	if js.Selector != nil {
		errs = append(errs, field.Invalid(jp.Child("spec", "selector"), js.Selector, "`selector` will be auto-generated"))
	}
	if deref(js.ManualSelector, false) {
		errs = append(errs, field.NotSupported(jp.Child("spec", "manualSelector"), js.ManualSelector, []string{"nil", "false"}))
	}
	for name, v := range map[string]*int32{"successfulJobsHistoryLimit": s.SuccessfulJobsHistoryLimit, "failedJobsHistoryLimit": s.FailedJobsHistoryLimit} {
		if v != nil {
			errs = append(errs, validateNonnegative(int64(*v), specPath.Child(name))...)
		}
	}
	return errs
}

var timeZonePart = regexp.MustCompile(`^[A-Za-z\.\-_0-9+]{1,14}$`)

// validateTimeZone: an IANA zone this board knows (from its zoneinfo).
func validateTimeZone(tz *string, fldPath *field.Path) field.ErrorList {
	if tz == nil {
		return nil
	}
	if *tz == "" {
		return field.ErrorList{field.Invalid(fldPath, tz, "timeZone must be nil or non-empty string")}
	}
	for _, part := range strings.Split(*tz, "/") {
		if part == "." || part == ".." || strings.HasPrefix(part, "-") || !timeZonePart.MatchString(part) {
			return field.ErrorList{field.Invalid(fldPath, tz, "unknown time zone "+*tz)}
		}
	}
	if strings.EqualFold(*tz, "Local") {
		return field.ErrorList{field.Invalid(fldPath, tz, "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones")}
	}
	if _, err := time.LoadLocation(*tz); err != nil {
		return field.ErrorList{field.Invalid(fldPath, tz, err.Error())}
	}
	return nil
}

func validateCronJobStatus(c, old *batchv1.CronJob) field.ErrorList {
	errs := validateMetaUpdate(&c.ObjectMeta, &old.ObjectMeta)
	for i, ref := range c.Status.Active {
		if ref.Name == "" {
			errs = append(errs, field.Required(field.NewPath("status", "active").Index(i).Child("name"), ""))
		}
	}
	return errs
}
