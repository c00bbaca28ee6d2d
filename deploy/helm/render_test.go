package chart

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// defaultArgs are the default values plus the one value without a default:
// flowd's public address.
var defaultArgs = []string{"--set", "baseUrl=https://flowd.example.com"}

// helmBinary is the pinned Helm (the tool of go.mod), built once by TestMain.
var helmBinary string

func TestMain(m *testing.M) {
	flag.Parse()
	// "go tool -n" builds the tool when needed and prints its path.
	out, err := exec.Command("go", "tool", "-n", "helm").Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "go tool -n helm:", err)
		os.Exit(1)
	}
	helmBinary = strings.TrimSpace(string(out))
	os.Exit(m.Run())
}

// render runs `helm template` on the chart with args and returns its objects.
func render(t *testing.T, args ...string) ([]object, error) {
	t.Helper()
	cmd := exec.Command(helmBinary, append([]string{"template", "flowd", "./flowd", "--namespace", "flowd"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("helm template %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return decode(t, stdout.Bytes()), nil
}

// object is one rendered object: its kind, name, and the typed value it
// decoded into.
type object struct {
	kind, name, source string
	value              any
}

// kinds lists every kind the chart may render, with the type it must decode
// into; any other kind fails, a Secret among them: the chart only names them.
var kinds = map[string]func() any{
	"apps/v1/Deployment":                      func() any { return &appsv1.Deployment{} },
	"batch/v1/Job":                            func() any { return &batchv1.Job{} },
	"v1/Service":                              func() any { return &corev1.Service{} },
	"v1/ServiceAccount":                       func() any { return &corev1.ServiceAccount{} },
	"v1/ConfigMap":                            func() any { return &corev1.ConfigMap{} },
	"policy/v1/PodDisruptionBudget":           func() any { return &policyv1.PodDisruptionBudget{} },
	"autoscaling/v2/HorizontalPodAutoscaler":  func() any { return &autoscalingv2.HorizontalPodAutoscaler{} },
	"networking.k8s.io/v1/NetworkPolicy":      func() any { return &networkingv1.NetworkPolicy{} },
	"networking.k8s.io/v1/Ingress":            func() any { return &networkingv1.Ingress{} },
	"monitoring.coreos.com/v1/ServiceMonitor": func() any { return &monitoringv1.ServiceMonitor{} },
	"monitoring.coreos.com/v1/PrometheusRule": func() any { return &monitoringv1.PrometheusRule{} },
}

var sourceLine = regexp.MustCompile(`(?m)^# Source: (.*)$`)

// decode splits Helm's output into documents and decodes each strictly: a
// field its type does not have, or a field given twice, fails the test.
func decode(t *testing.T, out []byte) []object {
	t.Helper()
	var objs []object
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(out), -1) {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		source := "?"
		if m := sourceLine.FindStringSubmatch(doc); m != nil {
			source = m[1]
		}
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatalf("%s: not YAML: %v\n%s", source, err, doc)
		}
		newValue := kinds[head.APIVersion+"/"+head.Kind]
		if newValue == nil {
			t.Errorf("%s: %s %s is not a kind the chart renders", source, head.APIVersion, head.Kind)
			continue
		}
		value := newValue()
		if err := yaml.UnmarshalStrict([]byte(doc), value); err != nil {
			t.Errorf("%s: %s %s does not decode strictly: %v", source, head.Kind, head.Metadata.Name, err)
			continue
		}
		objs = append(objs, object{kind: head.Kind, name: head.Metadata.Name, source: source, value: value})
	}
	if len(objs) == 0 {
		t.Fatalf("helm template rendered nothing:\n%s", out)
	}
	return objs
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// renders are the value sets make lint renders: the defaults and each example.
func renders(t *testing.T) map[string][]string {
	t.Helper()
	examples, err := filepath.Glob("flowd/examples/*.yaml")
	if err != nil || len(examples) < 2 {
		t.Fatalf("flowd/examples: %v %v, want the external PostgreSQL and the Citus examples", examples, err)
	}
	out := map[string][]string{"default": defaultArgs}
	for _, e := range examples {
		out[filepath.Base(e)] = []string{"-f", e}
	}
	return out
}

// TestChartKeepsItsPromises renders the defaults and every example and checks
// each promise of the chart on what came out.
