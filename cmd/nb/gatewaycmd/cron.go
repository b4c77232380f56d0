package gatewaycmd

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/gateway/cron"
	"github.com/nbots/nb/gateway/gatewayrun"
)

const gatewayCronUsage = "use nb gateway cron list [--all] | add --name N --message M (--every SECONDS | --cron EXPR [--tz ZONE] | --at ISO) [--deliver] [--to CHAT --channel CH] [--catch-up] | remove ID | enable ID [--disable] | run ID [--force]"

// gatewayCron runs nb gateway cron in the workspace; zone is
// agents.defaults.timezone (nil: the machine's). It edits cron/jobs.json
// under the lock the running gateway's scheduler takes too, so it works
// whether or not the gateway runs, and a job added while it runs fires
// without a restart.
func (cl *cli) gatewayCron(ctx context.Context, workspace, legacy string, zone *time.Location, maxJobs int, args []string) error {
	if len(args) == 0 {
		return &usageError{"missing command: " + gatewayCronUsage}
	}
	if zone == nil {
		zone = time.Local
	}
	fs, _ := cl.gatewayFlagSet("nb gateway cron "+args[0], "", "")
	switch args[0] {
	case "list":
		fs.Usage, fs.About = "nb gateway cron list [flags]", "Lists the scheduled jobs."
		fs.BoolP("all", "a", false, "the disabled jobs too")
	case "add":
		fs.Usage, fs.About = "nb gateway cron add --name N --message M (--every SECONDS | --cron EXPR [--tz ZONE] | --at ISO) [flags]", "Adds a job: a message the assistant receives on a schedule."
		fs.StringP("name", "n", "", "the job's `name`")
		fs.StringP("message", "m", "", "the `message` the assistant receives")
		fs.StringP("every", "e", "", "run every `seconds`")
		fs.StringP("cron", "c", "", "run on a cron `expression` (0 9 * * *)")
		fs.String("tz", "", "the cron expression's time `zone` (default agents.defaults.timezone)")
		fs.String("at", "", "run once, at an ISO `time` (2026-01-02T09:00:00)")
		fs.BoolP("deliver", "d", false, "send the answer to --to on --channel")
		fs.String("to", "", "the `chat` the answer goes to")
		fs.String("channel", "", "the `channel` of --to")
		fs.Bool("catch-up", false, "run the job once at start when it missed runs while the gateway was stopped (by default they are skipped, as nanobot skips them)")
	case "remove":
		fs.Usage, fs.About = "nb gateway cron remove [flags] ID", "Removes a job."
	case "enable":
		fs.Usage, fs.About = "nb gateway cron enable [flags] ID", "Enables a job (or disables it with --disable)."
		fs.Bool("disable", false, "disable the job instead")
	case "run":
		fs.Usage, fs.About = "nb gateway cron run [flags] ID", "Runs a job now (in the running gateway, else when it starts)."
		fs.BoolP("force", "f", false, "run it even if it is disabled")
	case "help", "--help", "-h":
		fs.Usage, fs.About = "nb gateway cron list | add | remove | enable | run [flags]", "Schedules messages to the assistant (nanobot's cron jobs, in the workspace's\ncron/jobs.json): nb gateway cron COMMAND --help tells more of each command."
		return fs.Parse([]string{"--help"})
	default:
		if s := cartridge.Nearest(args[0], []string{"list", "add", "remove", "enable", "run"}); s != "" {
			return &usageError{fmt.Sprintf("unknown command %q: did you mean nb gateway cron %s?", args[0], s)}
		}
		return &usageError{fmt.Sprintf("unknown command %q: %s", args[0], gatewayCronUsage)}
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	opts := map[string]string{}
	fs.Visit(func(f *pflag.Flag) { opts[f.Name] = f.Value.String() })
	for k, v := range opts {
		if v == "false" {
			delete(opts, k)
		}
	}
	words := fs.Args()
	store := cron.NewStore(workspace)
	store.MaxJobs, store.Legacy = maxJobs, legacy
	store.Log = func(msg string) { fmt.Fprintln(cl.stderr, "nb: "+msg) }
	switch args[0] {
	case "list":
		if len(words) > 0 {
			return &usageError{"nb gateway cron list takes no argument: " + gatewayCronUsage}
		}
		return cl.cronList(store, zone, opts["all"] != "")
	case "add":
		if len(words) > 0 {
			return &usageError{fmt.Sprintf("unexpected %q: %s", words[0], gatewayCronUsage)}
		}
		return cl.cronAdd(ctx, store, zone, opts)
	}
	if len(words) != 1 {
		return &usageError{fmt.Sprintf("nb gateway cron %s takes one job id: %s", args[0], gatewayCronUsage)}
	}
	id := words[0]
	var msg string
	err := store.Edit(ctx, func(f *cron.File) error {
		i := f.Find(id)
		if i < 0 {
			return fmt.Errorf("job %s not found", id)
		}
		j := &f.Jobs[i]
		now := time.Now()
		switch args[0] {
		case "remove":
			f.Jobs = append(f.Jobs[:i], f.Jobs[i+1:]...)
			msg = "✓ Removed job " + id
		case "enable":
			j.Enabled = opts["disable"] == ""
			j.UpdatedAtMs = now.UnixMilli()
			j.State.NextRunAtMs = nil
			if next, ok := j.Schedule.Next(now, zone); ok && j.Enabled {
				ms := next.UnixMilli()
				j.State.NextRunAtMs = &ms
			}
			msg = fmt.Sprintf("✓ Job '%s' %s", j.Name, map[bool]string{true: "enabled", false: "disabled"}[j.Enabled])
		case "run":
			if !j.Enabled && opts["force"] == "" {
				return fmt.Errorf("job %s is disabled: --force runs it anyway", id)
			}
			j.RunNow = true
			if store.Running() {
				msg = fmt.Sprintf("✓ Job '%s' handed to the running gateway: it runs now", j.Name)
			} else {
				msg = fmt.Sprintf("✓ Job '%s' queued: the gateway is not running; it runs when the gateway starts", j.Name)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(cl.stdout, msg)
	return nil
}

func (cl *cli) cronList(store *cron.Store, zone *time.Location, all bool) error {
	f, err := store.Load()
	if err != nil {
		return err
	}
	var jobs []cron.Job
	for _, j := range f.Jobs {
		if all || j.Enabled {
			jobs = append(jobs, j)
		}
	}
	if len(jobs) == 0 {
		fmt.Fprintln(cl.stdout, "No scheduled jobs.")
		return nil
	}
	w := tabwriter.NewWriter(cl.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tName\tSchedule\tStatus\tNext Run")
	var broken []string
	for _, j := range jobs {
		sched := "one-time"
		switch j.Schedule.Kind {
		case cron.KindEvery:
			if j.Schedule.EveryMs != nil {
				sched = fmt.Sprintf("every %ds", *j.Schedule.EveryMs/1000)
			}
		case cron.KindCron:
			if j.Schedule.Expr != nil {
				sched = *j.Schedule.Expr
				if j.Schedule.TZ != nil && *j.Schedule.TZ != "" {
					sched += " (" + *j.Schedule.TZ + ")"
				}
			}
		}
		status := "enabled"
		if !j.Enabled {
			status = "disabled"
		}
		next := ""
		if j.State.NextRunAtMs != nil && j.Enabled {
			loc, err := j.Schedule.Zone(zone)
			if err != nil {
				loc = zone
			}
			next = time.UnixMilli(*j.State.NextRunAtMs).In(loc).Format("2006-01-02 15:04 MST")
		}
		if err := j.Problem(); err != nil && j.Enabled {
			status, next = "broken", "never: "+err.Error()
			broken = append(broken, fmt.Sprintf("nb: job %s (%s) never runs: %v: fix its schedule in %s or remove it", j.ID, j.Name, err, store.Path))
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", j.ID, j.Name, sched, status, next)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, b := range broken {
		fmt.Fprintln(cl.stderr, b)
	}
	return nil
}

func (cl *cli) cronAdd(ctx context.Context, store *cron.Store, zone *time.Location, opts map[string]string) error {
	if opts["tz"] != "" && opts["cron"] == "" {
		return &usageError{"--tz can only be used with --cron"}
	}
	if opts["name"] == "" || opts["message"] == "" {
		return &usageError{"nb gateway cron add needs --name and --message: " + gatewayCronUsage}
	}
	spec := cron.Spec{Name: opts["name"], Message: opts["message"], Cron: opts["cron"], TZ: opts["tz"],
		Deliver: opts["deliver"] != "", To: opts["to"], Channel: opts["channel"], CatchUp: opts["catch-up"] != ""}
	n := 0
	for _, k := range []string{"every", "cron", "at"} {
		if opts[k] != "" {
			n++
		}
	}
	if n != 1 {
		return &usageError{"give one of --every, --cron or --at: " + gatewayCronUsage}
	}
	if s := opts["every"]; s != "" {
		secs, err := strconv.Atoi(s)
		if err != nil || secs <= 0 {
			return &usageError{fmt.Sprintf("--every %s: a whole number of seconds above 0", s)}
		}
		spec.Every = time.Duration(secs) * time.Second
	}
	if s := opts["at"]; s != "" {
		t, err := cron.ParseISO(s, zone)
		if err != nil {
			return &usageError{"--at: " + err.Error()}
		}
		spec.At = t
	}
	job, err := cron.NewJob(spec, time.Now(), zone)
	if err != nil {
		return err
	}
	if err := store.Add(ctx, job); err != nil {
		return err
	}
	fmt.Fprintf(cl.stdout, "✓ Added job '%s' (%s)\n", job.Name, job.ID)
	return nil
}

// gatewayCronCommand finds the workspace and zone as nb gateway does
// (--config and --workspace may come anywhere) and runs gatewayCron.
func (cl *cli) gatewayCronCommand(ctx context.Context, args []string) error {
	cfg, ws := "", ""
	var rest []string
	for i := 0; i < len(args); i++ {
		name, value, has := strings.Cut(args[i], "=")
		if name != "--config" && name != "--workspace" && name != "-config" && name != "-workspace" {
			rest = append(rest, args[i])
			continue
		}
		if !strings.HasPrefix(name, "--") {
			fmt.Fprintf(cl.stderr, "nb: gateway cron %s is deprecated: write -%s (one dash is for one-letter flags)\n", name, name)
		}
		if !has {
			if i+1 >= len(args) {
				return &usageError{name + " needs a value"}
			}
			i++
			value = args[i]
		}
		if strings.HasSuffix(name, "config") {
			cfg = value
		} else {
			ws = value
		}
	}
	if len(rest) == 0 || slices.Contains(rest, "--help") || slices.Contains(rest, "-h") || rest[0] == "help" {
		if len(rest) == 0 || rest[0] == "help" {
			rest = []string{"--help"}
		}
		return cl.gatewayCron(ctx, "", "", nil, 0, rest) // only the help: no configuration needed
	}
	c, err := cl.loadGatewayConfig(gatewayFlags{config: &cfg, workspace: &ws})
	if err != nil {
		return err
	}
	zone, err := gatewayrun.Zone(c)
	if err != nil {
		return err
	}
	return cl.gatewayCron(ctx, c.Workspace, c.NanobotCron, zone, c.Gateway.Limits.Cron(), rest)
}
