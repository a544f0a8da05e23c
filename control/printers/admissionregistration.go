package printers

import (
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// webhookConfigurationColumns are the columns of both kinds of webhook
// configuration: NAME WEBHOOKS AGE, WEBHOOKS the number of webhooks.
func webhookConfigurationColumns(webhooksDoc string) []metav1.TableColumnDefinition {
	return []metav1.TableColumnDefinition{
		nameColumn(),
		column("Webhooks", typeInteger, webhooksDoc),
		ageColumn(),
	}
}

// ValidatingWebhookConfigurations prints admissionregistration.k8s.io/v1
// ValidatingWebhookConfigurations: NAME WEBHOOKS AGE.
var ValidatingWebhookConfigurations = &Printer{
	columns: webhookConfigurationColumns(admissionregistrationv1.ValidatingWebhookConfiguration{}.SwaggerDoc()["webhooks"]),
	rows: typed(cells(func(c *admissionregistrationv1.ValidatingWebhookConfiguration, now time.Time) []interface{} {
		return []interface{}{c.Name, int64(len(c.Webhooks)), since(c.CreationTimestamp, now)}
	}), func(l *admissionregistrationv1.ValidatingWebhookConfigurationList) []admissionregistrationv1.ValidatingWebhookConfiguration {
		return l.Items
	}),
}

// MutatingWebhookConfigurations prints admissionregistration.k8s.io/v1
// MutatingWebhookConfigurations: NAME WEBHOOKS AGE.
var MutatingWebhookConfigurations = &Printer{
	columns: webhookConfigurationColumns(admissionregistrationv1.MutatingWebhookConfiguration{}.SwaggerDoc()["webhooks"]),
	rows: typed(cells(func(c *admissionregistrationv1.MutatingWebhookConfiguration, now time.Time) []interface{} {
		return []interface{}{c.Name, int64(len(c.Webhooks)), since(c.CreationTimestamp, now)}
	}), func(l *admissionregistrationv1.MutatingWebhookConfigurationList) []admissionregistrationv1.MutatingWebhookConfiguration {
		return l.Items
	}),
}
