package main

// The docker-compose stack (docker-compose.yml, the Dockerfile and deploy/)
// checked against the code without Docker: topic names against the billing
// example's parameters, commands and flags against the real cobra commands,
// environment values through loadAppConfig, ports across the services,
// metric names in the recording rules against what sluiceprom exports.
// TestComposeCheckerCatches shows that each check can fail.

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/plugin/sluiceprom"
	"github.com/sluice-streams/sluice/processor"
	"github.com/sluice-streams/sluice/txn"
)

// repoRoot is where docker-compose.yml and the Dockerfile are, from the
// package directory that go test runs in.
const repoRoot = "../.."

// composeFile is the part of the Compose specification the stack uses.
// Fields with several spellings in the spec (a command as a string or a
// list, environment as a map or a list, ...) accept each.
type composeFile struct {
	Services map[string]*service `yaml:"services"`
}

type service struct {
	Image       string              `yaml:"image"`
	Build       *build              `yaml:"build"`
	Entrypoint  words               `yaml:"entrypoint"`
	Command     words               `yaml:"command"`
	Environment env                 `yaml:"environment"`
	DependsOn   dependsOn           `yaml:"depends_on"`
	Healthcheck *composeHealthcheck `yaml:"healthcheck"`
	Deploy      struct {
		Replicas *int `yaml:"replicas"`
	} `yaml:"deploy"`
	Restart       string  `yaml:"restart"`
	Tmpfs         words   `yaml:"tmpfs"`
	Volumes       []mount `yaml:"volumes"`
	Ports         []any   `yaml:"ports"`
	ContainerName string  `yaml:"container_name"`
	User          string  `yaml:"user"`
}

// words is a list of strings, or one string split at spaces (Compose splits
// a string command shell-style; the stack's strings need no quoting).
type words []string

func (w *words) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*w = strings.Fields(n.Value)
		return nil
	}
	var l []string
	if err := n.Decode(&l); err != nil {
		return err
	}
	*w = l
	return nil
}

// env is the environment of a service: a map, or a list of KEY=VALUE.
type env map[string]string

func (e *env) UnmarshalYAML(n *yaml.Node) error {
	*e = env{}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			(*e)[n.Content[i].Value] = n.Content[i+1].Value // scalars: 1 is "1"
		}
	case yaml.SequenceNode:
		for _, item := range n.Content {
			k, v, _ := strings.Cut(item.Value, "=")
			(*e)[k] = v
		}
	default:
		return fmt.Errorf("environment: want a map or a list, line %d", n.Line)
	}
	return nil
}

// dependsOn maps each dependency to its condition; a list means
// service_started.
type dependsOn map[string]string

func (d *dependsOn) UnmarshalYAML(n *yaml.Node) error {
	*d = dependsOn{}
	if n.Kind == yaml.SequenceNode {
		var l []string
		if err := n.Decode(&l); err != nil {
			return err
		}
		for _, s := range l {
			(*d)[s] = "service_started"
		}
		return nil
	}
	var m map[string]struct {
		Condition string `yaml:"condition"`
	}
	if err := n.Decode(&m); err != nil {
		return err
	}
	for s, c := range m {
		(*d)[s] = orDefault(c.Condition, "service_started")
	}
	return nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// build is a build context, given as a path or as a map.
type build struct {
	Context    string `yaml:"context"`
	Dockerfile string `yaml:"dockerfile"`
}

func (b *build) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		b.Context = n.Value
		return nil
	}
	type plain build
	return n.Decode((*plain)(b))
}

type composeHealthcheck struct {
	Test    words  `yaml:"test"`
	Disable bool   `yaml:"disable"`
	Retries int    `yaml:"retries"`
	Timeout string `yaml:"timeout"`
}

// mount is a volume, bind mount or tmpfs: "source:target[:mode]" or the
// long syntax.
type mount struct {
	Type     string `yaml:"type"`
	Source   string `yaml:"source"`
	Target   string `yaml:"target"`
	ReadOnly bool   `yaml:"read_only"`
}

func (m *mount) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		parts := strings.Split(n.Value, ":")
		switch len(parts) {
		case 1:
			m.Type, m.Target = "volume", parts[0]
		default:
			m.Source, m.Target = parts[0], parts[1]
			m.ReadOnly = len(parts) > 2 && strings.Contains(parts[2], "ro")
			m.Type = "volume"
			if strings.HasPrefix(m.Source, ".") || strings.HasPrefix(m.Source, "/") {
				m.Type = "bind"
			}
		}
		return nil
	}
	type plain mount
	return n.Decode((*plain)(m))
}

// promConfig is the part of Prometheus' configuration the stack uses.
type promConfig struct {
	RuleFiles     []string `yaml:"rule_files"`
	ScrapeConfigs []struct {
		JobName     string `yaml:"job_name"`
		MetricsPath string `yaml:"metrics_path"`
		DNSSD       []struct {
			Names []string `yaml:"names"`
			Type  string   `yaml:"type"`
			Port  int      `yaml:"port"`
		} `yaml:"dns_sd_configs"`
		Static []struct {
			Targets []string `yaml:"targets"`
		} `yaml:"static_configs"`
	} `yaml:"scrape_configs"`
}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []rule `yaml:"rules"`
	} `yaml:"groups"`
}

type rule struct {
	Record string `yaml:"record"`
	Alert  string `yaml:"alert"`
	Expr   string `yaml:"expr"`
}

// dockerInstr is one instruction of a Dockerfile, continuation lines
// joined.
type dockerInstr struct {
	Cmd  string // upper case
	Args string
}

func parseDockerfile(text string) []dockerInstr {
	var out []dockerInstr
	var cur strings.Builder
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(cont + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, dockerInstr{strings.ToUpper(cmd), strings.TrimSpace(args)})
		cur.Reset()
	}
	return out
}

// stack is the deployment as the files describe it.
type stack struct {
	compose composeFile
	// The files bind-mounted into the prometheus service: its
	// configuration, and the rest as rule files by their path in the
	// container.
	prometheus *promConfig
	rules      map[string]*ruleFile
	dockerfile []dockerInstr
}

// loadStack reads docker-compose.yml, the Dockerfile of the billing build
// and the files mounted into prometheus.
func loadStack(root string) (*stack, error) {
	s := &stack{rules: map[string]*ruleFile{}}
	data, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		return nil, err
	}
	if err := yaml.Unmarshal(data, &s.compose); err != nil {
		return nil, fmt.Errorf("docker-compose.yml: %w", err)
	}
	df := "Dockerfile"
	if b := s.service("billing"); b != nil && b.Build != nil && b.Build.Dockerfile != "" {
		df = b.Build.Dockerfile
	}
	data, err = os.ReadFile(filepath.Join(root, df))
	if err != nil {
		return nil, err
	}
	s.dockerfile = parseDockerfile(string(data))
	p := s.service("prometheus")
	if p == nil {
		return s, nil
	}
	for _, m := range p.Volumes {
		if m.Type != "bind" || !strings.HasSuffix(m.Source, ".yml") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, m.Source))
		if err != nil {
			return nil, fmt.Errorf("prometheus mount: %w", err)
		}
		if filepath.Base(m.Target) == "prometheus.yml" {
			s.prometheus = new(promConfig)
			if err := yaml.Unmarshal(data, s.prometheus); err != nil {
				return nil, fmt.Errorf("%s: %w", m.Source, err)
			}
			continue
		}
		rf := new(ruleFile)
		if err := yaml.Unmarshal(data, rf); err != nil {
			return nil, fmt.Errorf("%s: %w", m.Source, err)
		}
		s.rules[m.Target] = rf
	}
	return s, nil
}

func (s *stack) service(name string) *service { return s.compose.Services[name] }

// metricInfo is what sluice exports under a metric name.
type metricInfo struct {
	typ    dto.MetricType // -1 when the collector emitted none (per-task metrics of an idle app)
	labels []string
}

// exportedMetrics lists the metrics of sluiceprom's collector: every name
// and its labels from Describe, the type of those Collect emits for an app
// that has not started.
func exportedMetrics(t *testing.T) map[string]metricInfo {
	t.Helper()
	e, _ := examples.Get("billing")
	app, err := processor.New(e.Build(e.Defaults(nil)), processor.ApplicationID("compose-test"),
		processor.Brokers("127.0.0.1:1"), processor.StateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	c := sluiceprom.NewCollector(app)
	descs := make(chan *prometheus.Desc, 100)
	c.Describe(descs)
	close(descs)
	// Desc has no accessors; its String is
	// Desc{fqName: "...", help: "...", constLabels: {...}, variableLabels: {a,b}}.
	re := regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)
	out := map[string]metricInfo{}
	for d := range descs {
		m := re.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read %s", d)
		}
		var labels []string
		if m[2] != "" {
			labels = strings.Split(m[2], ",")
		}
		out[m[1]] = metricInfo{typ: -1, labels: labels}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		mi := out[f.GetName()]
		mi.typ = f.GetType()
		out[f.GetName()] = mi
	}
	if len(out) < 10 || out["sluice_commit_latency_seconds"].typ != dto.MetricType_HISTOGRAM {
		t.Fatalf("exported metrics look wrong: %v", out)
	}
	return out
}

// problems collects what is wrong with a stack.
type problems []string

func (p *problems) add(where, format string, args ...any) {
	*p = append(*p, where+": "+fmt.Sprintf(format, args...))
}

// parseSluiceArgs parses args as the sluice command line they are, with the
// real commands: it returns the subcommand with its flags set and its
// positional arguments.
func parseSluiceArgs(args []string) (*cobra.Command, []string, error) {
	cmd, rest, err := newRootCmd().Find(args)
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.ParseFlags(rest); err != nil {
		return nil, nil, err
	}
	pos := cmd.Flags().Args()
	if err := cmd.ValidateArgs(pos); err != nil {
		return nil, nil, err
	}
	return cmd, pos, nil
}

// withEnv runs f with exactly the SLUICE_* variables of e set: the
// container's environment, not the test's.
func withEnv(e env, f func()) {
	saved := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(k, envPrefix) {
			saved[k] = v
			os.Unsetenv(k)
		}
	}
	for k, v := range e {
		if strings.HasPrefix(k, envPrefix) {
			os.Setenv(k, v)
		}
	}
	defer func() {
		for k := range e {
			if strings.HasPrefix(k, envPrefix) {
				os.Unsetenv(k)
			}
		}
		for k, v := range saved {
			os.Setenv(k, v)
		}
	}()
	f()
}

// sluiceService is a service running the sluice image: its command parsed,
// its configuration loaded as the binary would load it.
type sluiceService struct {
	name string
	svc  *service
	cmd  *cobra.Command
	args []string
	cfg  appConfig
}

// parseSluiceService parses the command of a service that runs the sluice
// image, whose entrypoint is the binary.
func (s *stack) parseSluiceService(p *problems, name, wantCmd string) *sluiceService {
	svc := s.service(name)
	if svc == nil {
		p.add(name, "no such service")
		return nil
	}
	if len(svc.Entrypoint) > 0 {
		p.add(name, "entrypoint %v overrides the image's sluice binary", svc.Entrypoint)
	}
	cmd, args, err := parseSluiceArgs(svc.Command)
	if err != nil {
		p.add(name, "command %q is not a valid sluice command line: %v", svc.Command, err)
		return nil
	}
	if cmd.Name() != wantCmd {
		p.add(name, "runs `sluice %s`, want `sluice %s`", cmd.Name(), wantCmd)
		return nil
	}
	for k := range svc.Environment {
		if strings.HasPrefix(k, envPrefix) && !slices.ContainsFunc(appKeys, func(a struct{ key, flag string }) bool { return envName(a.key) == k }) {
			p.add(name, "environment %s is no sluice setting (unknown key, ignored)", k)
		}
	}
	ss := &sluiceService{name: name, svc: svc, cmd: cmd, args: args}
	withEnv(svc.Environment, func() { ss.cfg, err = loadAppConfig(cmd, "sluice-"+name) })
	if err != nil {
		p.add(name, "configuration: %v", err)
		return nil
	}
	return ss
}

// flag returns the value of a flag of the service's command, given or
// default.
func (ss *sluiceService) flag(name string) string {
	f := ss.cmd.Flags().Lookup(name)
	if f == nil {
		return ""
	}
	return f.Value.String()
}

func (ss *sluiceService) sameImage(p *problems, other *sluiceService) {
	a, b := ss.svc, other.svc
	switch {
	case a.Image != "" && a.Image == b.Image:
	case a.Build != nil && b.Build != nil && *a.Build == *b.Build && a.Image == b.Image:
	default:
		p.add(ss.name, "does not run the image %s builds (image %q, build %v)", other.name, a.Image, a.Build)
	}
}

// dockerImage is what the Dockerfile says about the image.
type dockerImage struct {
	binary string // the ENTRYPOINT's program
}

func checkDockerfile(p *problems, instrs []dockerInstr) dockerImage {
	var img dockerImage
	const where = "Dockerfile"
	var stages [][]dockerInstr
	for _, in := range instrs {
		if in.Cmd == "FROM" {
			stages = append(stages, nil)
		}
		if len(stages) > 0 {
			stages[len(stages)-1] = append(stages[len(stages)-1], in)
		}
	}
	if len(stages) < 2 {
		p.add(where, "%d stage(s), want a multi-stage build (toolchain stage, then a small runtime image)", len(stages))
		return img
	}
	final := stages[len(stages)-1]
	// The build: a static binary of ./cmd/sluice, path out.
	var built string
	for _, st := range stages[:len(stages)-1] {
		cgoOff := false
		for _, in := range st {
			if in.Cmd == "ENV" && strings.Contains(in.Args, "CGO_ENABLED=0") {
				cgoOff = true
			}
			if in.Cmd != "RUN" || !strings.Contains(in.Args, "go build") {
				continue
			}
			if !cgoOff && !strings.Contains(in.Args, "CGO_ENABLED=0") {
				p.add(where, "go build without CGO_ENABLED=0: the binary would need libc, which the runtime image lacks")
			}
			if !strings.Contains(in.Args, "-trimpath") {
				p.add(where, "go build without -trimpath")
			}
			if !strings.Contains(in.Args, "./cmd/sluice") {
				p.add(where, "go build does not build ./cmd/sluice")
			}
			if m := regexp.MustCompile(`-o\s+(\S+)`).FindStringSubmatch(in.Args); m != nil {
				built = m[1]
			}
		}
	}
	if built == "" {
		p.add(where, "no stage runs `go build -o PATH ./cmd/sluice`")
	}
	var user, copied string
	for _, in := range final {
		switch in.Cmd {
		case "USER":
			user = in.Args
		case "COPY":
			f := strings.Fields(in.Args)
			if slices.ContainsFunc(f, func(s string) bool { return strings.HasPrefix(s, "--from=") }) && len(f) >= 2 && f[len(f)-2] == built {
				copied = f[len(f)-1]
			}
		case "ENTRYPOINT":
			var ep []string
			if err := json.Unmarshal([]byte(in.Args), &ep); err != nil || len(ep) == 0 {
				p.add(where, "ENTRYPOINT %s: want the exec form [\"/sluice\"], so that the binary gets SIGTERM", in.Args)
				continue
			}
			img.binary = ep[0]
		}
	}
	name, _, _ := strings.Cut(user, ":")
	switch {
	case user == "":
		p.add(where, "the runtime stage has no USER: the binary would run as root")
	case name == "root" || name == "0":
		p.add(where, "USER %s: the binary would run as root", user)
	}
	if built != "" && copied == "" {
		p.add(where, "the runtime stage does not COPY --from the build stage's %s", built)
	}
	if img.binary == "" || img.binary != copied {
		p.add(where, "ENTRYPOINT %q is not the copied binary %q", img.binary, copied)
	}
	return img
}

// checkStack returns every problem of s. metrics is what sluice exports.
func checkStack(s *stack, metrics map[string]metricInfo) problems {
	var p problems
	img := checkDockerfile(&p, s.dockerfile)

	// kafka: one KRaft node, healthy before anything uses it.
	kafka := s.service("kafka")
	var advertised []string
	if kafka == nil {
		p.add("kafka", "no such service")
	} else {
		if !strings.HasPrefix(kafka.Image, "apache/kafka:") || strings.HasSuffix(kafka.Image, ":latest") {
			p.add("kafka", "image %q: want the official apache/kafka with a pinned version", kafka.Image)
		}
		roles := strings.Split(kafka.Environment["KAFKA_PROCESS_ROLES"], ",")
		if !slices.Contains(roles, "broker") || !slices.Contains(roles, "controller") {
			p.add("kafka", "KAFKA_PROCESS_ROLES %v: want broker,controller (KRaft, no ZooKeeper)", roles)
		}
		// One node: the internal topics must fit on it, or transactions
		// (exactly_once) and offset commits cannot start.
		for _, k := range []string{"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR", "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"} {
			if kafka.Environment[k] != "1" {
				p.add("kafka", "%s %q: want 1 on a single node", k, kafka.Environment[k])
			}
		}
		checkHealthcheck(&p, "kafka", kafka)
		for _, l := range strings.Split(kafka.Environment["KAFKA_ADVERTISED_LISTENERS"], ",") {
			if u, err := url.Parse(l); err == nil && u.Host != "" {
				advertised = append(advertised, u.Host)
			}
		}
	}
	reachable := func(where string, brokers []string) {
		if len(brokers) == 0 {
			p.add(where, "no bootstrap.servers")
		}
		for _, b := range brokers {
			if !slices.Contains(advertised, b) {
				p.add(where, "bootstrap server %s is not an advertised listener of kafka %v", b, advertised)
			}
		}
	}

	// billing: the replicas.
	billing := s.parseSluiceService(&p, "billing", "run")
	var topicsWanted []string
	var inputTopic string
	httpPort := ""
	if billing != nil {
		svc := billing.svc
		if len(billing.args) != 1 || billing.args[0] != "billing" {
			p.add("billing", "runs example %v, want billing", billing.args)
		}
		if svc.Build == nil || filepath.Clean(svc.Build.Context) != "." {
			p.add("billing", "build %v: want the repository (build: .)", svc.Build)
		}
		if r := svc.Deploy.Replicas; r == nil || *r != 3 {
			p.add("billing", "deploy.replicas %v, want 3", deref(r))
		}
		if svc.ContainerName != "" {
			p.add("billing", "container_name %q: replicas cannot share a name", svc.ContainerName)
		}
		if len(svc.Ports) > 0 {
			p.add("billing", "ports %v: replicas cannot share host ports (Prometheus reaches them inside the network)", svc.Ports)
		}
		if svc.User == "root" || svc.User == "0" || strings.HasPrefix(svc.User, "0:") || strings.HasPrefix(svc.User, "root:") {
			p.add("billing", "user %q: runs as root", svc.User)
		}
		if !slices.Contains([]string{"on-failure", "unless-stopped", "always"}, svc.Restart) {
			p.add("billing", "restart %q: a replica that stops should come back", svc.Restart)
		}
		if svc.DependsOn["topics"] != "service_completed_successfully" {
			p.add("billing", "depends on topics with %q, want service_completed_successfully", svc.DependsOn["topics"])
		}
		if svc.Environment[envName(keyAppID)] == "" {
			p.add("billing", "%s not set", envName(keyAppID))
		}
		cfg := billing.cfg
		reachable("billing", cfg.Brokers)
		if cfg.Guarantee != txn.ExactlyOnce {
			p.add("billing", "processing.guarantee %s, want exactly_once", cfg.Guarantee)
		}
		if cfg.StandbyReplicas < 1 {
			p.add("billing", "num.standby.replicas %d: want at least 1, so that a replica's stop does not wait for a full restore", cfg.StandbyReplicas)
		}
		if !slices.Contains(svc.Tmpfs, cfg.StateDir) && !slices.ContainsFunc(svc.Volumes, func(m mount) bool { return m.Target == cfg.StateDir }) {
			p.add("billing", "state.dir %s is neither a tmpfs nor a volume: the image's file system is not the place for Pebble", cfg.StateDir)
		}
		// The HTTP endpoint: on all interfaces, one port for Prometheus
		// and the healthcheck.
		host, port, err := net.SplitHostPort(billing.flag("http"))
		switch {
		case err != nil:
			p.add("billing", "--http %q: want 0.0.0.0:PORT (/metrics and /readyz)", billing.flag("http"))
		case host != "0.0.0.0" && host != "::" && host != "[::]":
			p.add("billing", "--http %s: want all interfaces, or neither Prometheus nor other replicas reach it", billing.flag("http"))
		default:
			httpPort = port
		}
		checkHealthcheck(&p, "billing", svc)
		if hc := svc.Healthcheck; hc != nil && len(hc.Test) > 1 {
			checkSluiceHealthcheck(&p, hc.Test, img.binary, httpPort)
		}
		e, _ := examples.Get("billing")
		params := exampleParams(billing.cmd, e)
		for _, prm := range e.Params {
			topicsWanted = append(topicsWanted, params[prm.Name])
		}
		inputTopic = params["input"]
	}

	// topics: one-shot, after kafka is healthy, creating billing's topics.
	if topics := s.service("topics"); topics == nil {
		p.add("topics", "no such service")
	} else {
		if topics.DependsOn["kafka"] != "service_healthy" {
			p.add("topics", "depends on kafka with %q, want service_healthy", topics.DependsOn["kafka"])
		}
		if topics.Restart != "" && topics.Restart != "no" {
			p.add("topics", "restart %q: a one-shot service must not restart", topics.Restart)
		}
		script := strings.Join(append(slices.Clone(topics.Entrypoint), topics.Command...), " ")
		if !strings.Contains(script, "--create") {
			p.add("topics", "creates no topic: %q", script)
		}
		tokens := strings.FieldsFunc(script, func(r rune) bool { return r == ' ' || r == '\n' || r == ';' || r == '"' || r == '\'' })
		for _, t := range topicsWanted {
			if !slices.Contains(tokens, t) {
				p.add("topics", "does not create %s, a topic of billing", t)
			}
		}
	}

	// generator: billing's input, from the same image.
	if gen := s.parseSluiceService(&p, "generator", "gen"); gen != nil {
		if billing != nil {
			gen.sameImage(&p, billing)
		}
		if len(gen.args) != 1 || gen.args[0] != "billing" {
			p.add("generator", "generates %v, want billing", gen.args)
		}
		if t := gen.flag("topic"); billing != nil && t != inputTopic {
			p.add("generator", "produces to %q, billing reads %q", t, inputTopic)
		}
		if r, _ := strconv.ParseFloat(gen.flag("rate"), 64); r <= 0 {
			p.add("generator", "--rate %s: want a steady positive rate", gen.flag("rate"))
		}
		if gen.flag("count") != "0" {
			p.add("generator", "--count %s: want 0, to run until the stack stops", gen.flag("count"))
		}
		if gen.svc.Environment[envName(keyBrokers)] == "" && !gen.cmd.Flags().Changed("brokers") {
			p.add("generator", "no bootstrap servers: set %s or --brokers", envName(keyBrokers))
		}
		reachable("generator", gen.cfg.Brokers)
		if gen.svc.DependsOn["topics"] != "service_completed_successfully" {
			p.add("generator", "depends on topics with %q, want service_completed_successfully", gen.svc.DependsOn["topics"])
		}
	}

	checkComposeDB(&p, s, billing)
	checkPrometheus(&p, s, httpPort, metrics)
	return p
}

// checkSluiceHealthcheck checks that test runs the image's own binary (the
// image has no shell or curl) against the replica's --http port.
func checkSluiceHealthcheck(p *problems, test words, binary, httpPort string) {
	if test[0] != "CMD" || test[1] != binary {
		p.add("billing", "healthcheck %v: want [\"CMD\", %q, \"healthcheck\", ...]: the image has no shell or curl", test, binary)
		return
	}
	cmd, _, err := parseSluiceArgs(test[2:])
	if err != nil || cmd.Name() != "healthcheck" {
		p.add("billing", "healthcheck %v is not `sluice healthcheck`: %v", test, err)
		return
	}
	if httpPort == "" {
		return // --http is already reported
	}
	u, err := url.Parse(cmd.Flags().Lookup("url").Value.String())
	if err != nil || u.Port() != httpPort || (u.Hostname() != "127.0.0.1" && u.Hostname() != "localhost") || (u.Path != "/readyz" && u.Path != "/healthz") {
		p.add("billing", "healthcheck URL %v: want http://127.0.0.1:%s/readyz (the --http port)", u, httpPort)
	}
}

func deref(p *int) any {
	if p == nil {
		return "unset"
	}
	return *p
}

func checkHealthcheck(p *problems, name string, svc *service) {
	switch hc := svc.Healthcheck; {
	case hc == nil || hc.Disable || len(hc.Test) == 0 || hc.Test[0] == "NONE":
		p.add(name, "no healthcheck")
	case hc.Test[0] != "CMD" && hc.Test[0] != "CMD-SHELL":
		p.add(name, "healthcheck test %v: want [\"CMD\", ...] or [\"CMD-SHELL\", ...]", hc.Test)
	}
}

// The recording rules every stack must have: throughput, latency, lag,
// aborts.
var requiredRecords = []string{
	"sluice:records_processed:rate1m",
	"sluice:commit_latency_seconds:p99",
	"sluice:end_to_end_latency_seconds:p99",
	"sluice:consumer_lag:sum",
	"sluice:aborts:rate5m",
}

var (
	promIdent   = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promStrings = regexp.MustCompile(`"[^"]*"`)
	promBy      = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
	promRate    = regexp.MustCompile(`\b(?:rate|irate|increase)\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)`)
)

func checkPrometheus(p *problems, s *stack, billingPort string, metrics map[string]metricInfo) {
	prom := s.service("prometheus")
	if prom == nil {
		p.add("prometheus", "no such service")
		return
	}
	if !strings.HasPrefix(prom.Image, "prom/prometheus:") || strings.HasSuffix(prom.Image, ":latest") {
		p.add("prometheus", "image %q: want prom/prometheus with a pinned version", prom.Image)
	}
	mounted := func(target string) bool {
		return slices.ContainsFunc(prom.Volumes, func(m mount) bool { return m.Target == target && m.Type == "bind" })
	}
	if !mounted("/etc/prometheus/prometheus.yml") || s.prometheus == nil {
		p.add("prometheus", "deploy's prometheus.yml is not mounted at /etc/prometheus/prometheus.yml, where the image reads its configuration")
		return
	}

	// The scrape: the billing service's replicas, on the --http port.
	scraped := false
	for _, sc := range s.prometheus.ScrapeConfigs {
		if sc.MetricsPath != "" && sc.MetricsPath != "/metrics" {
			continue
		}
		for _, d := range sc.DNSSD {
			if slices.Contains(d.Names, "billing") && (d.Type == "" || d.Type == "A") && strconv.Itoa(d.Port) == billingPort {
				scraped = true
			}
		}
		for _, st := range sc.Static {
			scraped = scraped || slices.Contains(st.Targets, net.JoinHostPort("billing", billingPort))
		}
	}
	if !scraped && billingPort != "" {
		p.add("prometheus.yml", "no scrape config reaches every billing replica's /metrics on port %q (dns_sd_configs names [billing], type A)", billingPort)
	}

	// The rules: mounted, the required ones present, every metric they
	// read exported by sluice with the labels they group by.
	if len(s.prometheus.RuleFiles) == 0 {
		p.add("prometheus.yml", "no rule_files")
	}
	records := map[string]bool{}
	type expr struct{ file, record, expr string }
	var exprs []expr
	for _, f := range s.prometheus.RuleFiles {
		rf, ok := s.rules[f]
		if !ok || !mounted(f) {
			p.add("prometheus.yml", "rule file %s is not mounted into the prometheus service", f)
			continue
		}
		for _, g := range rf.Groups {
			for _, r := range g.Rules {
				if r.Record != "" {
					records[r.Record] = true
				}
				exprs = append(exprs, expr{f, orDefault(r.Record, r.Alert), r.Expr})
			}
		}
	}
	for _, r := range requiredRecords {
		if !records[r] {
			p.add("rules", "no recording rule %s", r)
		}
	}
	for _, e := range exprs {
		where := "rule " + e.record
		if e.expr == "" {
			p.add(where, "empty expr")
			continue
		}
		if strings.Count(e.expr, "(") != strings.Count(e.expr, ")") || strings.Count(e.expr, "[") != strings.Count(e.expr, "]") || strings.Count(e.expr, "{") != strings.Count(e.expr, "}") {
			p.add(where, "unbalanced brackets in %q", e.expr)
		}
		bare := promStrings.ReplaceAllString(e.expr, `""`)
		var labels []string // of the sluice metrics read
		for _, id := range promIdent.FindAllString(bare, -1) {
			switch {
			case strings.Contains(id, ":"):
				if !records[id] {
					p.add(where, "reads %s, which no rule records", id)
				}
			case strings.HasPrefix(id, "sluice_"):
				mi, ok := exportedSeries(metrics, id)
				if !ok {
					p.add(where, "reads %s, which sluice does not export", id)
				}
				labels = append(labels, mi.labels...)
			}
		}
		for _, m := range promBy.FindAllStringSubmatch(bare, -1) {
			for _, l := range strings.Split(m[1], ",") {
				if l = strings.TrimSpace(l); l != "" && !slices.Contains(labels, l) && !slices.Contains([]string{"instance", "job", "le"}, l) {
					p.add(where, "groups by %s, a label none of its sluice metrics has (%v)", l, labels)
				}
			}
		}
		for _, m := range promRate.FindAllStringSubmatch(bare, -1) {
			if strings.HasPrefix(m[1], "sluice_") && !isCounterSeries(metrics, m[1]) {
				p.add(where, "rate of %s, which is not a counter", m[1])
			}
		}
	}
}

// exportedSeries finds the metric a series name belongs to: the name itself,
// or a histogram's _bucket, _sum or _count.
func exportedSeries(metrics map[string]metricInfo, name string) (metricInfo, bool) {
	if mi, ok := metrics[name]; ok {
		return mi, true
	}
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suf); ok {
			if mi, ok := metrics[base]; ok && mi.typ == dto.MetricType_HISTOGRAM {
				return mi, true
			}
		}
	}
	return metricInfo{}, false
}

// isCounterSeries: counters, and the parts of a histogram, only grow.
func isCounterSeries(metrics map[string]metricInfo, name string) bool {
	if mi, ok := metrics[name]; ok {
		return mi.typ == dto.MetricType_COUNTER || (mi.typ == -1 && strings.HasSuffix(name, "_total"))
	}
	_, ok := exportedSeries(metrics, name)
	return ok
}

func TestComposeStack(t *testing.T) {
	s, err := loadStack(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, pr := range checkStack(s, exportedMetrics(t)) {
		t.Error(pr)
	}
	// The loader must have found what the checks read, or they check
	// nothing.
	if len(s.compose.Services) < 5 || s.prometheus == nil || len(s.rules) == 0 || len(s.dockerfile) < 5 {
		t.Fatalf("loaded %d services, prometheus.yml %v, %d rule files, %d Dockerfile instructions",
			len(s.compose.Services), s.prometheus != nil, len(s.rules), len(s.dockerfile))
	}
}

// TestComposeCheckerCatches breaks the stack one way at a time, as loaded,
// and expects the checker to say so.
func TestComposeCheckerCatches(t *testing.T) {
	metrics := exportedMetrics(t)
	setCmdFlag := func(svc *service, flag, val string) {
		i := slices.Index(svc.Command, flag)
		if i < 0 {
			svc.Command = append(svc.Command, flag, val)
			return
		}
		svc.Command[i+1] = val
	}
	setDocker := func(s *stack, cmd, args string) {
		for i, in := range s.dockerfile {
			if in.Cmd == cmd {
				s.dockerfile[i].Args = args
			}
		}
	}
	firstRule := func(s *stack, record string) *string {
		for _, rf := range s.rules {
			for gi := range rf.Groups {
				for ri := range rf.Groups[gi].Rules {
					if rf.Groups[gi].Rules[ri].Record == record {
						return &rf.Groups[gi].Rules[ri].Expr
					}
				}
			}
		}
		t.Fatalf("no rule %s to break", record)
		return nil
	}
	one := 1
	for _, c := range []struct {
		name   string
		break_ func(s *stack)
		want   string
	}{
		{"one replica", func(s *stack) { s.service("billing").Deploy.Replicas = &one }, "billing: deploy.replicas 1, want 3"},
		{"no replicas key", func(s *stack) { s.service("billing").Deploy.Replicas = nil }, "deploy.replicas unset"},
		{"billing without healthcheck", func(s *stack) { s.service("billing").Healthcheck = nil }, "billing: no healthcheck"},
		{"kafka without healthcheck", func(s *stack) { s.service("kafka").Healthcheck = nil }, "kafka: no healthcheck"},
		{"healthcheck by shell", func(s *stack) {
			s.service("billing").Healthcheck.Test = words{"CMD-SHELL", "curl -f localhost:9100/readyz"}
		}, "the image has no shell"},
		{"healthcheck on another port", func(s *stack) {
			s.service("billing").Healthcheck.Test = words{"CMD", "/sluice", "healthcheck", "--url", "http://127.0.0.1:9200/readyz"}
		}, "(the --http port)"},
		{"root user in the image", func(s *stack) { setDocker(s, "USER", "root") }, "USER root"},
		{"no user in the image", func(s *stack) {
			s.dockerfile = slices.DeleteFunc(s.dockerfile, func(in dockerInstr) bool { return in.Cmd == "USER" })
		}, "no USER"},
		{"root user in compose", func(s *stack) { s.service("billing").User = "0:0" }, "runs as root"},
		{"no postgres", func(s *stack) { delete(s.compose.Services, "postgres") }, "postgres: no such service"},
		{"no prepared transactions", func(s *stack) {
			c := s.service("postgres").Command
			s.service("postgres").Command = slices.DeleteFunc(slices.Clone(c), func(w string) bool { return strings.HasPrefix(w, "max_prepared") })
		}, "max_prepared_transactions 0"},
		{"billing without --db", func(s *stack) {
			c := s.service("billing").Command
			i := slices.Index(c, "--db")
			s.service("billing").Command = slices.Delete(slices.Clone(c), i, i+2)
		}, "billing: no --db"},
		{"--db elsewhere", func(s *stack) { setCmdFlag(s.service("billing"), "--db", "postgres://billing@db:5432/billing") }, "does not reach the postgres service"},
		{"--db wrong password", func(s *stack) { s.service("billing").Environment[envName(keyDBPassword)] = "nope" }, "is not the postgres service's POSTGRES_PASSWORD"},
		{"--db password on the command line", func(s *stack) {
			setCmdFlag(s.service("billing"), "--db", "postgres://billing:billing@postgres:5432/billing")
		}, "--db holds the password"},
		{"billing before postgres", func(s *stack) { delete(s.service("billing").DependsOn, "postgres") }, "depends on postgres"},
		{"single-stage image", func(s *stack) {
			i := slices.IndexFunc(s.dockerfile[1:], func(in dockerInstr) bool { return in.Cmd == "FROM" })
			s.dockerfile = s.dockerfile[i+1:]
		}, "want a multi-stage build"},
		{"cgo on", func(s *stack) {
			for i, in := range s.dockerfile {
				s.dockerfile[i].Args = strings.ReplaceAll(in.Args, "CGO_ENABLED=0 ", "")
			}
		}, "without CGO_ENABLED=0"},
		{"no -trimpath", func(s *stack) {
			for i, in := range s.dockerfile {
				s.dockerfile[i].Args = strings.ReplaceAll(in.Args, "-trimpath", "")
			}
		}, "without -trimpath"},
		{"binary not copied", func(s *stack) {
			s.dockerfile = slices.DeleteFunc(s.dockerfile, func(in dockerInstr) bool { return in.Cmd == "COPY" && strings.Contains(in.Args, "/out/sluice") })
		}, "does not COPY --from the build stage's /out/sluice"},
		{"healthcheck is another command", func(s *stack) { s.service("billing").Healthcheck.Test = words{"CMD", "/sluice", "config"} }, "is not `sluice healthcheck`"},
		{"shell-form entrypoint", func(s *stack) { setDocker(s, "ENTRYPOINT", "/sluice") }, "exec form"},
		{"generator on the wrong topic", func(s *stack) { setCmdFlag(s.service("generator"), "--topic", "bils") }, `generator: produces to "bils", billing reads "bills"`},
		{"generator on billing's renamed input", func(s *stack) { setCmdFlag(s.service("billing"), "--input", "orders") }, `generator: produces to "bills", billing reads "orders"`},
		{"billing input not created", func(s *stack) { setCmdFlag(s.service("billing"), "--input", "orders") }, "topics: does not create orders"},
		{"dead-letter topic not created", func(s *stack) {
			c := s.service("topics").Command
			for i := range c {
				c[i] = strings.ReplaceAll(c[i], " bills-dlq", "")
			}
		}, "does not create bills-dlq"},
		{"generator bounded", func(s *stack) { setCmdFlag(s.service("generator"), "--count", "10") }, "--count 10"},
		{"generator from another image", func(s *stack) {
			g := s.service("generator")
			g.Image, g.Build = "sluice:other", nil
		}, "generator: does not run the image billing builds"},
		{"generator without brokers", func(s *stack) { delete(s.service("generator").Environment, "SLUICE_BOOTSTRAP_SERVERS") }, "generator: no bootstrap servers"},
		{"generator is not gen", func(s *stack) { s.service("generator").Command = words{"run", "billing"} }, "generator: runs `sluice run`, want `sluice gen`"},
		{"unknown flag", func(s *stack) { setCmdFlag(s.service("billing"), "--replicas", "3") }, "not a valid sluice command line"},
		{"http on loopback", func(s *stack) { setCmdFlag(s.service("billing"), "--http", "127.0.0.1:9100") }, "want all interfaces"},
		{"at least once", func(s *stack) { s.service("billing").Environment["SLUICE_PROCESSING_GUARANTEE"] = "at_least_once" }, "want exactly_once"},
		{"invalid guarantee", func(s *stack) { s.service("billing").Environment["SLUICE_PROCESSING_GUARANTEE"] = "exactly-once" }, "billing: configuration: invalid processing.guarantee"},
		{"no standby", func(s *stack) { delete(s.service("billing").Environment, "SLUICE_NUM_STANDBY_REPLICAS") }, "num.standby.replicas 0"},
		{"misspelt key", func(s *stack) { s.service("billing").Environment["SLUICE_BOOTSTRAP_SERVER"] = "kafka:9092" }, "SLUICE_BOOTSTRAP_SERVER is no sluice setting"},
		{"no application id", func(s *stack) { delete(s.service("billing").Environment, "SLUICE_APPLICATION_ID") }, "SLUICE_APPLICATION_ID not set"},
		{"wrong broker", func(s *stack) { s.service("billing").Environment["SLUICE_BOOTSTRAP_SERVERS"] = "broker:9092" }, "broker:9092 is not an advertised listener"},
		{"state on the image", func(s *stack) { s.service("billing").Tmpfs = nil }, "state.dir /state is neither"},
		{"no restart", func(s *stack) { s.service("billing").Restart = "" }, "billing: restart"},
		{"container name", func(s *stack) { s.service("billing").ContainerName = "billing" }, "container_name"},
		{"host port", func(s *stack) { s.service("billing").Ports = []any{"9100:9100"} }, "cannot share host ports"},
		{"billing before topics", func(s *stack) { s.service("billing").DependsOn["topics"] = "service_started" }, "billing: depends on topics"},
		{"topics before kafka is healthy", func(s *stack) { s.service("topics").DependsOn["kafka"] = "service_started" }, "want service_healthy"},
		{"topics restarting", func(s *stack) { s.service("topics").Restart = "always" }, "one-shot"},
		{"zookeeper mode", func(s *stack) { s.service("kafka").Environment["KAFKA_PROCESS_ROLES"] = "broker" }, "want broker,controller"},
		{"transaction log replicated thrice", func(s *stack) { s.service("kafka").Environment["KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR"] = "3" }, "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR"},
		{"kafka latest", func(s *stack) { s.service("kafka").Image = "apache/kafka:latest" }, "pinned version"},
		{"scrape on another port", func(s *stack) { s.prometheus.ScrapeConfigs[0].DNSSD[0].Port = 9101 }, "no scrape config reaches"},
		{"scrape of another service", func(s *stack) { s.prometheus.ScrapeConfigs[0].DNSSD[0].Names = []string{"sluice"} }, "no scrape config reaches"},
		{"config not mounted", func(s *stack) { s.service("prometheus").Volumes = s.service("prometheus").Volumes[1:] }, "prometheus.yml is not mounted"},
		{"rules not mounted", func(s *stack) { s.service("prometheus").Volumes = s.service("prometheus").Volumes[:1] }, "is not mounted into the prometheus service"},
		{"no rule files", func(s *stack) { s.prometheus.RuleFiles = nil }, "no rule_files"},
		{"required rule missing", func(s *stack) {
			for _, rf := range s.rules {
				for gi := range rf.Groups {
					rf.Groups[gi].Rules = slices.DeleteFunc(rf.Groups[gi].Rules, func(r rule) bool {
						return r.Record == "sluice:consumer_lag:sum"
					})
				}
			}
		}, "no recording rule sluice:consumer_lag:sum"},
		{"metric without _total", func(s *stack) {
			*firstRule(s, "sluice:records_processed:rate1m") = "sum(rate(sluice_records_processed[1m]))"
		}, "reads sluice_records_processed, which sluice does not export"},
		{"buckets of a counter", func(s *stack) {
			*firstRule(s, "sluice:commit_latency_seconds:p99") = "histogram_quantile(0.99, sum by (le) (rate(sluice_commits_total_bucket[5m])))"
		}, "sluice_commits_total_bucket, which sluice does not export"},
		{"rate of a gauge", func(s *stack) {
			*firstRule(s, "sluice:consumer_lag:sum") = "sum by (task) (rate(sluice_consumer_lag_records[1m]))"
		}, "rate of sluice_consumer_lag_records, which is not a counter"},
		{"group by a label that is not there", func(s *stack) {
			*firstRule(s, "sluice:aborts:rate5m") = "sum by (reason) (rate(sluice_aborts_total[5m]))"
		}, "groups by reason"},
		{"reads an unrecorded series", func(s *stack) {
			*firstRule(s, "sluice:aborts:rate5m") = "sluice:aborts:rate1m * 5"
		}, "reads sluice:aborts:rate1m, which no rule records"},
		{"unbalanced", func(s *stack) {
			*firstRule(s, "sluice:aborts:rate5m") = "sum by (cause) (rate(sluice_aborts_total[5m])"
		}, "unbalanced"},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			s, err := loadStack(repoRoot)
			if err != nil {
				t.Fatal(err)
			}
			c.break_(s)
			got := checkStack(s, metrics)
			if !slicesContainSubstring(got, c.want) {
				t.Errorf("checker missed it: want a problem containing %q, got %q", c.want, got)
			}
		})
	}
}
