// Package chart checks the flowd Helm chart: it renders the chart with the
// pinned Helm for the default values and every example, decodes each object
// strictly into its Kubernetes type, and holds it to what the chart promises.
package chart

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
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
func TestChartKeepsItsPromises(t *testing.T) {
	for name, args := range renders(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			objs, err := render(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			checkObjects(t, objs)
		})
	}
}

// checkObjects holds one render to the chart's promises.
func checkObjects(t *testing.T, objs []object) {
	t.Helper()
	var (
		deploy    *appsv1.Deployment
		job       *batchv1.Job
		hpa       *autoscalingv2.HorizontalPodAutoscaler
		pdb       *policyv1.PodDisruptionBudget
		services  []*corev1.Service
		monitors  []*monitoringv1.ServiceMonitor
		policies  []*networkingv1.NetworkPolicy
		ingresses []*networkingv1.Ingress
	)
	for _, o := range objs {
		switch v := o.value.(type) {
		case *appsv1.Deployment:
			deploy = v
		case *batchv1.Job:
			job = v
		case *autoscalingv2.HorizontalPodAutoscaler:
			hpa = v
		case *policyv1.PodDisruptionBudget:
			pdb = v
		case *corev1.Service:
			services = append(services, v)
		case *monitoringv1.ServiceMonitor:
			monitors = append(monitors, v)
		case *networkingv1.NetworkPolicy:
			policies = append(policies, v)
		case *networkingv1.Ingress:
			ingresses = append(ingresses, v)
		case *monitoringv1.PrometheusRule:
			checkPrometheusRule(t, v)
		case *corev1.ConfigMap:
			checkDashboard(t, v)
		}
	}
	if deploy == nil {
		t.Fatal("no Deployment rendered")
	}
	checkReplicas(t, deploy, hpa)
	if pdb == nil || pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() < 1 ||
		!reflect.DeepEqual(pdb.Spec.Selector.MatchLabels, deploy.Spec.Selector.MatchLabels) {
		t.Errorf("want a PodDisruptionBudget selecting the instances with maxUnavailable ≥ 1, got %+v", pdb)
	}
	pod := deploy.Spec.Template.Spec
	checkPod(t, "Deployment "+deploy.Name, pod)
	flowd := pod.Containers[0]
	httpPort, opsPort := listenPort(t, flowd, "FLOWD_ADDR"), listenPort(t, flowd, "FLOWD_OPS_ADDR")
	if httpPort == opsPort {
		t.Errorf("the public and the operations listener share port %d", httpPort)
	}
	for name, probe := range map[string]*corev1.Probe{"readiness": flowd.ReadinessProbe, "liveness": flowd.LivenessProbe, "startup": flowd.StartupProbe} {
		want := map[string]string{"readiness": "/readyz", "liveness": "/healthz", "startup": "/healthz"}[name]
		if probe == nil || probe.HTTPGet == nil {
			t.Errorf("%s probe: want an HTTP GET of %s, got %+v", name, want, probe)
			continue
		}
		if port := containerPort(t, flowd, probe.HTTPGet.Port.String()); port != opsPort || probe.HTTPGet.Path != want {
			t.Errorf("%s probe asks %s on port %d, want %s on the operations port %d (FLOWD_OPS_ADDR)", name, probe.HTTPGet.Path, port, want, opsPort)
		}
	}
	checkServices(t, services, deploy, httpPort, opsPort)
	for _, m := range monitors {
		checkServiceMonitor(t, m, services, flowd, opsPort)
	}
	for _, np := range policies {
		checkNetworkPolicy(t, np, deploy, flowd, httpPort, opsPort)
	}
	for _, ing := range ingresses {
		checkIngress(t, ing, services, flowd, httpPort)
	}
	migrateOnStart := envValue(flowd, "FLOWD_MIGRATE_ON_START")
	if job == nil {
		if migrateOnStart != "true" {
			t.Errorf("without a migration Job, FLOWD_MIGRATE_ON_START is %q, want true", migrateOnStart)
		}
		return
	}
	if migrateOnStart != "false" {
		t.Errorf("with the migration Job, FLOWD_MIGRATE_ON_START is %q, want false", migrateOnStart)
	}
	checkMigrationJob(t, job, flowd)
}

// checkReplicas: at least two instances, fixed or as the autoscaler's floor.
func checkReplicas(t *testing.T, deploy *appsv1.Deployment, hpa *autoscalingv2.HorizontalPodAutoscaler) {
	t.Helper()
	switch {
	case hpa != nil:
		if deploy.Spec.Replicas != nil {
			t.Errorf("the Deployment fixes %d replicas beside an autoscaler", *deploy.Spec.Replicas)
		}
		if hpa.Spec.MinReplicas == nil || *hpa.Spec.MinReplicas < 2 || hpa.Spec.ScaleTargetRef.Name != deploy.Name {
			t.Errorf("the autoscaler must keep at least 2 instances of %s: %+v", deploy.Name, hpa.Spec)
		}
	case deploy.Spec.Replicas == nil || *deploy.Spec.Replicas < 2:
		t.Errorf("the Deployment runs %v replicas, want at least 2", deploy.Spec.Replicas)
	}
	if s := deploy.Spec.Strategy.RollingUpdate; s == nil || s.MaxUnavailable == nil || s.MaxUnavailable.IntValue() != 0 {
		t.Errorf("a rollout must not take an instance away before its replacement is ready: %+v", deploy.Spec.Strategy)
	}
}

// secretName matches the variables that hold secrets: they must come from a
// Secret, never as a value.
var secretName = regexp.MustCompile(`^(DATABASE_URL|FLOWD_(KEY_ENCRYPTION_KEY|SESSION_KEY|DATA_KEY|DATA_KEY_PREVIOUS)|.*_SECRET|.*PASSWORD.*|.*_TOKEN|OTEL_EXPORTER_OTLP(_TRACES)?_HEADERS)$`)

// checkPod holds a pod to the security promises: non-root, read-only root
// file system, no privilege escalation, no capabilities, the runtime's
// seccomp profile, no service account token, and secrets only by reference.
func checkPod(t *testing.T, what string, pod corev1.PodSpec) {
	t.Helper()
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: the pod must run as a non-root user with seccomp RuntimeDefault: %+v", what, psc)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Errorf("%s: mounts a service account token flowd never uses", what)
	}
	if len(pod.Containers) == 0 || len(pod.InitContainers) > 0 {
		t.Fatalf("%s: want its containers only, got %d and %d init containers", what, len(pod.Containers), len(pod.InitContainers))
	}
	for _, c := range pod.Containers {
		sc := c.SecurityContext
		if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot ||
			sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			(sc.Privileged != nil && *sc.Privileged) ||
			sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 ||
			sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault ||
			(sc.RunAsUser != nil && *sc.RunAsUser == 0) {
			t.Errorf("%s: container %s must be non-root, read-only, unprivileged, with ALL capabilities dropped and seccomp RuntimeDefault: %+v", what, c.Name, sc)
		}
		for _, from := range c.EnvFrom {
			if from.SecretRef == nil {
				t.Errorf("%s: container %s takes variables from %+v; only Secrets may be taken whole", what, c.Name, from)
			}
		}
		for _, e := range c.Env {
			if secretName.MatchString(e.Name) && (e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
				t.Errorf("%s: container %s: %s holds a secret and must come from a secretKeyRef, not %+v", what, c.Name, e.Name, e)
			}
		}
		if c.Image == "" || strings.HasSuffix(c.Image, ":") {
			t.Errorf("%s: container %s has no image tag: %q", what, c.Name, c.Image)
		}
	}
}

// checkServices: the public Service reaches the public port only, and the
// ServiceMonitor's Service the operations port.
func checkServices(t *testing.T, services []*corev1.Service, deploy *appsv1.Deployment, httpPort, opsPort int) {
	t.Helper()
	flowd := deploy.Spec.Template.Spec.Containers[0]
	var public, ops int
	for _, s := range services {
		for k, v := range s.Spec.Selector {
			if deploy.Spec.Template.Labels[k] != v {
				t.Errorf("Service %s selects %s=%s, which the instances lack", s.Name, k, v)
			}
		}
		for _, p := range s.Spec.Ports {
			switch containerPort(t, flowd, p.TargetPort.String()) {
			case httpPort:
				public++
			case opsPort:
				ops++
				if s.Spec.ClusterIP != corev1.ClusterIPNone || len(s.Spec.Ports) != 1 {
					t.Errorf("Service %s exposes the operations port beside others or behind one address", s.Name)
				}
			default:
				t.Errorf("Service %s port %s leads to no listener of flowd", s.Name, p.Name)
			}
		}
	}
	if public != 1 || ops != 1 {
		t.Errorf("want one Service port to the public listener and one to the operations listener, got %d and %d", public, ops)
	}
}

// checkServiceMonitor: Prometheus scrapes /metrics on the operations port,
// through a Service that leads there.
func checkServiceMonitor(t *testing.T, m *monitoringv1.ServiceMonitor, services []*corev1.Service, flowd corev1.Container, opsPort int) {
	t.Helper()
	scraped := 0
	for _, s := range services {
		if !selects(m.Spec.Selector.MatchLabels, s.Labels) {
			continue
		}
		for _, e := range m.Spec.Endpoints {
			for _, p := range s.Spec.Ports {
				if p.Name == e.Port && containerPort(t, flowd, p.TargetPort.String()) == opsPort && (e.Path == "" || e.Path == "/metrics") {
					scraped++
				}
			}
		}
	}
	if scraped != 1 {
		t.Errorf("ServiceMonitor %s scrapes the operations port through %d Service ports, want 1", m.Name, scraped)
	}
}

// checkNetworkPolicy: the instances' policy opens the public port, the
// operations port only to named peers, and lets DNS and the database out.
func checkNetworkPolicy(t *testing.T, np *networkingv1.NetworkPolicy, deploy *appsv1.Deployment, flowd corev1.Container, httpPort, opsPort int) {
	t.Helper()
	if !selects(np.Spec.PodSelector.MatchLabels, deploy.Spec.Template.Labels) {
		t.Errorf("NetworkPolicy %s does not select the instances", np.Name)
	}
	open := map[int]bool{}
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			port := containerPort(t, flowd, p.Port.String())
			if port == opsPort && len(rule.From) == 0 {
				t.Errorf("NetworkPolicy %s opens the operations port to everyone", np.Name)
			}
			open[port] = true
		}
	}
	if !open[httpPort] {
		t.Errorf("NetworkPolicy %s does not open the public port %d", np.Name, httpPort)
	}
	dns := false
	for _, rule := range np.Spec.Egress {
		for _, p := range rule.Ports {
			dns = dns || p.Port.IntValue() == 53
		}
	}
	if !dns || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
		t.Errorf("NetworkPolicy %s: want egress rules letting DNS out, got %+v", np.Name, np.Spec.Egress)
	}
}

// checkIngress: the Ingress leads to the public listener.
func checkIngress(t *testing.T, ing *networkingv1.Ingress, services []*corev1.Service, flowd corev1.Container, httpPort int) {
	t.Helper()
	for _, rule := range ing.Spec.Rules {
		for _, path := range rule.HTTP.Paths {
			b := path.Backend.Service
			ok := false
			for _, s := range services {
				for _, p := range s.Spec.Ports {
					if b != nil && s.Name == b.Name && (p.Name == b.Port.Name || p.Port == b.Port.Number) {
						ok = containerPort(t, flowd, p.TargetPort.String()) == httpPort
					}
				}
			}
			if !ok {
				t.Errorf("Ingress %s path %s does not lead to the public listener: %+v", ing.Name, path.Path, b)
			}
		}
	}
}

// selects reports whether every label of selector is among labels.
func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return len(selector) > 0
}

// checkMigrationJob: the Job runs `flowd migrate` with the same database as
// the instances, as a pre-install and pre-upgrade hook.
func checkMigrationJob(t *testing.T, job *batchv1.Job, flowd corev1.Container) {
	t.Helper()
	hooks := strings.Split(job.Annotations["helm.sh/hook"], ",")
	slices.Sort(hooks)
	if !slices.Equal(hooks, []string{"pre-install", "pre-upgrade"}) {
		t.Errorf("the migration Job's helm.sh/hook is %q, want pre-install,pre-upgrade", job.Annotations["helm.sh/hook"])
	}
	if p := job.Annotations["helm.sh/hook-delete-policy"]; !strings.Contains(p, "before-hook-creation") {
		t.Errorf("the migration Job's hook-delete-policy %q does not remove the last one first: the next upgrade would fail", p)
	}
	pod := job.Spec.Template.Spec
	checkPod(t, "Job "+job.Name, pod)
	if pod.RestartPolicy != corev1.RestartPolicyNever && pod.RestartPolicy != corev1.RestartPolicyOnFailure {
		t.Errorf("the migration Job's restartPolicy is %q", pod.RestartPolicy)
	}
	c := pod.Containers[0]
	if !slices.Equal(c.Args, []string{"migrate"}) || c.Image != flowd.Image {
		t.Errorf("the migration Job runs %s %v, want %s migrate", c.Image, c.Args, flowd.Image)
	}
	for _, name := range []string{"DATABASE_URL", "FLOWD_CITUS"} {
		if a, b := envVar(c, name), envVar(flowd, name); a == nil || !reflect.DeepEqual(a, b) {
			t.Errorf("the migration Job's %s (%+v) differs from the instances' (%+v)", name, a, b)
		}
	}
}

// checkPrometheusRule: the rule groups are those of deploy/prometheus/alerts.yml.
func checkPrometheusRule(t *testing.T, rule *monitoringv1.PrometheusRule) {
	t.Helper()
	raw, err := os.ReadFile("../prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var want monitoringv1.PrometheusRuleSpec
	if err := yaml.UnmarshalStrict(raw, &want); err != nil {
		t.Fatalf("deploy/prometheus/alerts.yml: %v", err)
	}
	if len(want.Groups) == 0 || !reflect.DeepEqual(rule.Spec, want) {
		t.Errorf("PrometheusRule %s differs from deploy/prometheus/alerts.yml:\n got %+v\nwant %+v", rule.Name, rule.Spec, want)
	}
}

// checkDashboard: the ConfigMap holds deploy/grafana/flowd.json as it is.
func checkDashboard(t *testing.T, cm *corev1.ConfigMap) {
	t.Helper()
	raw, err := os.ReadFile("../grafana/flowd.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := cm.Data["flowd.json"]; got != strings.TrimRight(string(raw), "\n") {
		t.Errorf("ConfigMap %s does not hold deploy/grafana/flowd.json (%d bytes, want %d)", cm.Name, len(got), len(raw))
	}
}

// listenPort is the port of a listen address setting such as FLOWD_OPS_ADDR=":9090".
func listenPort(t *testing.T, c corev1.Container, name string) int {
	t.Helper()
	v := envValue(c, name)
	_, port, ok := strings.Cut(v, ":")
	n, err := strconv.Atoi(port)
	if !ok || err != nil {
		t.Fatalf("%s is %q, want an address such as :9090", name, v)
	}
	return n
}

// containerPort resolves a probe's or Service's port, by name or number.
func containerPort(t *testing.T, c corev1.Container, port string) int {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == port || strconv.Itoa(int(p.ContainerPort)) == port {
			return int(p.ContainerPort)
		}
	}
	if n, err := strconv.Atoi(port); err == nil {
		return n
	}
	t.Errorf("container %s has no port %q", c.Name, port)
	return -1
}

func envVar(c corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

func envValue(c corev1.Container, name string) string {
	if e := envVar(c, name); e != nil {
		return e.Value
	}
	return ""
}

// TestChartRefusesUnsafeValues: values that would break a promise fail the
// render with a line naming the value, rather than render.
func TestChartRefusesUnsafeValues(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "baseUrl: give flowd's public address"},
		{[]string{"--set", "baseUrl=https://x.example", "--set", "replicaCount=1"}, "replicaCount: run at least 2"},
		{[]string{"--set", "baseUrl=https://x.example", "--set", "env.FLOWD_DATA_KEY=c2VjcmV0"}, "env.FLOWD_DATA_KEY holds a secret"},
		{[]string{"--set", "baseUrl=https://x.example", "--set", "env.FLOWD_CONSOLE_OIDC_CLIENT_SECRET=s"}, "holds a secret"},
		{[]string{"--set", "baseUrl=https://x.example", "--set", "otel.OTEL_EXPORTER_OTLP_HEADERS=api-key=s"}, "otel.OTEL_EXPORTER_OTLP_HEADERS holds a secret"},
		{[]string{"--set", "baseUrl=https://x.example", "--set", "env.FLOWD_OPS_ADDR=:1"}, "env.FLOWD_OPS_ADDR: the chart sets it"},
		{[]string{"--set", "baseUrl=https://x.example", "--set", "otel.SERVICE=x"}, "only OTEL_* variables"},
		{[]string{"--set", "baseUrl=https://x.example", "--set", "keys.existingSecret="}, "keys.existingSecret"},
		{[]string{"--set", "baseUrl=https://x.example", "--set", "autoscaling.enabled=true", "--set", "autoscaling.minReplicas=1"}, "autoscaling.minReplicas"},
		{[]string{"--set", "baseUrl=https://x.example", "--set", "resources.limits.memory=1G"}, "give it in Mi or Gi"},
		{[]string{"--set", "baseUrl=consent.example"}, "is not an absolute http(s) URL"},
		{[]string{"--set", "baseUrl=https://x.example", "--set", "replicaCont=3"}, "additional properties 'replicaCont' not allowed"},
		{[]string{"--set", "baseUrl=https://x.example", "--set", "metrics.serviceMonitor.enable=true"}, "additional properties 'enable' not allowed"},
	} {
		_, err := render(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("helm template %v: got %v, want an error saying %q", tc.args, err, tc.want)
		}
	}
}

// TestSecretsOnlyByReference: what secretEnv names reaches the instances as
// a secretKeyRef, so that a secret beyond the chart's own (a sign-in
// provider's client secret, the OTLP headers) is never a value either.
func TestSecretsOnlyByReference(t *testing.T) {
	objs, err := render(t, "--set", "baseUrl=https://x.example",
		"--set", "secretEnv.FLOWD_CONSOLE_OIDC_CLIENT_SECRET.name=oidc", "--set", "secretEnv.FLOWD_CONSOLE_OIDC_CLIENT_SECRET.key=console",
		"--set", "secretEnv.OTEL_EXPORTER_OTLP_HEADERS.name=otel", "--set", "secretEnv.OTEL_EXPORTER_OTLP_HEADERS.key=headers")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if d, ok := o.value.(*appsv1.Deployment); ok {
			checkPod(t, "Deployment", d.Spec.Template.Spec)
			for _, name := range []string{"FLOWD_CONSOLE_OIDC_CLIENT_SECRET", "OTEL_EXPORTER_OTLP_HEADERS"} {
				if e := envVar(d.Spec.Template.Spec.Containers[0], name); e == nil || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
					t.Errorf("%s: want a secretKeyRef, got %+v", name, e)
				}
			}
		}
	}
}

// TestAlertsAndDashboardAreLinks: the chart's copies of the alert rules and
// the dashboard are symbolic links to deploy/, so that there is one file of
// each to change, and promtool and the PrometheusRule check the same rules.
func TestAlertsAndDashboardAreLinks(t *testing.T) {
	for link, target := range map[string]string{
		"flowd/files/alerts.yml": "../prometheus/alerts.yml",
		"flowd/files/flowd.json": "../grafana/flowd.json",
	} {
		fi, err := os.Lstat(link)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s is a copy; make it a symbolic link to deploy/%s", link, strings.TrimPrefix(target, "../"))
			continue
		}
		got, err := filepath.EvalSymlinks(link)
		if err != nil {
			t.Fatal(err)
		}
		want, err := filepath.Abs(target)
		if err != nil {
			t.Fatal(err)
		}
		if abs, _ := filepath.Abs(got); abs != want {
			t.Errorf("%s leads to %s, want %s", link, abs, want)
		}
	}
}
