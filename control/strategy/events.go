package strategy

import (
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// EventV1 is the strategy of events.k8s.io/v1 Events, stored as core/v1
// Events: the same objects under other names (ConvertEvent). They are
// validated as kube-apiserver does those of this API: as core Events,
// and more strictly (an event time, a type, no deprecated fields set).
var EventV1 = &Kind[*eventsv1.Event]{namespaced: true, create: validateEventV1, update: validateEventV1Update}

// EventV1Fields are the field selectors of events.k8s.io/v1 Events.
var EventV1Fields = fields(map[string]func(*eventsv1.Event) string{
	"regarding.kind":            func(o *eventsv1.Event) string { return o.Regarding.Kind },
	"regarding.namespace":       func(o *eventsv1.Event) string { return o.Regarding.Namespace },
	"regarding.name":            func(o *eventsv1.Event) string { return o.Regarding.Name },
	"regarding.uid":             func(o *eventsv1.Event) string { return string(o.Regarding.UID) },
	"regarding.apiVersion":      func(o *eventsv1.Event) string { return o.Regarding.APIVersion },
	"regarding.resourceVersion": func(o *eventsv1.Event) string { return o.Regarding.ResourceVersion },
	"regarding.fieldPath":       func(o *eventsv1.Event) string { return o.Regarding.FieldPath },
	"reason":                    func(o *eventsv1.Event) string { return o.Reason },
	"reportingController":       func(o *eventsv1.Event) string { return o.ReportingController },
	"type":                      func(o *eventsv1.Event) string { return o.Type },
})

// ConvertEvent converts between core/v1 and events.k8s.io/v1 Events, as
// kube-apiserver's conversion: regarding is involvedObject, note is
// message, the deprecated fields are the core ones of their names.
func ConvertEvent(obj runtime.Object, to schema.GroupVersion) (runtime.Object, error) {
	switch e := obj.(type) {
	case *corev1.Event:
		if to == eventsv1.SchemeGroupVersion {
			return eventToV1(e), nil
		}
	case *eventsv1.Event:
		if to == corev1.SchemeGroupVersion {
			return eventToCore(e), nil
		}
	}
	return nil, fmt.Errorf("strategy: no conversion of %T to %s", obj, to)
}

func eventToV1(in *corev1.Event) *eventsv1.Event {
	out := &eventsv1.Event{
		TypeMeta:   metav1.TypeMeta{APIVersion: eventsv1.SchemeGroupVersion.String(), Kind: "Event"},
		ObjectMeta: *in.ObjectMeta.DeepCopy(), EventTime: in.EventTime, ReportingController: in.ReportingController,
		ReportingInstance: in.ReportingInstance, Action: in.Action, Reason: in.Reason, Regarding: in.InvolvedObject,
		Note: in.Message, Type: in.Type, DeprecatedSource: in.Source, DeprecatedFirstTimestamp: in.FirstTimestamp,
		DeprecatedLastTimestamp: in.LastTimestamp, DeprecatedCount: in.Count,
	}
	if in.Related != nil {
		r := *in.Related
		out.Related = &r
	}
	if s := in.Series; s != nil {
		out.Series = &eventsv1.EventSeries{Count: s.Count, LastObservedTime: s.LastObservedTime}
	}
	return out
}

func eventToCore(in *eventsv1.Event) *corev1.Event {
	out := &corev1.Event{
		TypeMeta:   metav1.TypeMeta{APIVersion: corev1.SchemeGroupVersion.String(), Kind: "Event"},
		ObjectMeta: *in.ObjectMeta.DeepCopy(), EventTime: in.EventTime, ReportingController: in.ReportingController,
		ReportingInstance: in.ReportingInstance, Action: in.Action, Reason: in.Reason, InvolvedObject: in.Regarding,
		Message: in.Note, Type: in.Type, Source: in.DeprecatedSource, FirstTimestamp: in.DeprecatedFirstTimestamp,
		LastTimestamp: in.DeprecatedLastTimestamp, Count: in.DeprecatedCount,
	}
	if in.Related != nil {
		r := *in.Related
		out.Related = &r
	}
	if s := in.Series; s != nil {
		out.Series = &corev1.EventSeries{Count: s.Count, LastObservedTime: s.LastObservedTime}
	}
	return out
}

// validateEventV1 is kube-apiserver's validation of an Event created
// through events.k8s.io/v1 (its paths name the core fields, as there).
func validateEventV1(e *eventsv1.Event) field.ErrorList {
	c := eventToCore(e)
	errs := validateEvent(c)
	errs = append(errs, validateMeta(&c.ObjectMeta, true, nameIsDNSSubdomain)...)
	errs = append(errs, validateEventSeries(c.Series)...)
	if c.EventTime.IsZero() {
		errs = append(errs, field.Required(field.NewPath("eventTime"), ""))
	}
	if c.Type != corev1.EventTypeNormal && c.Type != corev1.EventTypeWarning {
		errs = append(errs, field.Invalid(field.NewPath("type"), "", fmt.Sprintf("has invalid value: %v", c.Type)))
	}
	if !c.FirstTimestamp.IsZero() {
		errs = append(errs, field.Invalid(field.NewPath("firstTimestamp"), "", "needs to be unset"))
	}
	if !c.LastTimestamp.IsZero() {
		errs = append(errs, field.Invalid(field.NewPath("lastTimestamp"), "", "needs to be unset"))
	}
	if c.Count != 0 {
		errs = append(errs, field.Invalid(field.NewPath("count"), "", "needs to be unset"))
	}
	if c.Source.Component != "" || c.Source.Host != "" {
		errs = append(errs, field.Invalid(field.NewPath("source"), "", "needs to be unset"))
	}
	return errs
}

// validateEventSeries checks a series: two events at least, a last time.
func validateEventSeries(s *corev1.EventSeries) field.ErrorList {
	var errs field.ErrorList
	if s != nil {
		if s.Count < 2 {
			errs = append(errs, field.Invalid(field.NewPath("series", "count"), "", "should be at least 2"))
		}
		if s.LastObservedTime.IsZero() {
			errs = append(errs, field.Required(field.NewPath("series", "lastObservedTime"), ""))
		}
	}
	return errs
}

// validateEventV1Update: through events.k8s.io/v1 only an Event's series
// (and metadata) may change, as kube-apiserver allows.
func validateEventV1Update(e, old *eventsv1.Event) field.ErrorList {
	c, o := eventToCore(e), eventToCore(old)
	errs := validateMetaUpdate(&c.ObjectMeta, &o.ObjectMeta)
	errs = append(errs, validateEventSeries(c.Series)...)
	for _, f := range []struct {
		path     string
		new, old any
	}{
		{"involvedObject", c.InvolvedObject, o.InvolvedObject}, {"reason", c.Reason, o.Reason}, {"message", c.Message, o.Message},
		{"source", c.Source, o.Source}, {"firstTimestamp", c.FirstTimestamp, o.FirstTimestamp},
		{"lastTimestamp", c.LastTimestamp, o.LastTimestamp}, {"count", c.Count, o.Count}, {"type", c.Type, o.Type},
		{"eventTime", c.EventTime, o.EventTime}, {"action", c.Action, o.Action}, {"related", c.Related, o.Related},
		{"reportingController", c.ReportingController, o.ReportingController},
		{"reportingInstance", c.ReportingInstance, o.ReportingInstance},
	} {
		if !reflect.DeepEqual(f.new, f.old) {
			errs = append(errs, field.Invalid(field.NewPath(f.path), f.new, "field is immutable"))
		}
	}
	return errs
}
