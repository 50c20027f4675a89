package main

import (
	"strconv"
	"strings"

	"github.com/sluice-streams/sluice/examples"
	"github.com/sluice-streams/sluice/plugin/sluicedb"
)

// checkComposeDB checks the postgres service and billing's --db against
// it (issue 17 item 8): the URL reaches the service with its user,
// password and database, billing waits for it to be healthy and creates
// the tables, and two-phase mode has prepared transactions enabled.
func checkComposeDB(p *problems, s *stack, billing *sluiceService) {
	pg := s.service("postgres")
	if pg == nil {
		p.add("postgres", "no such service")
		return
	}
	if !strings.HasPrefix(pg.Image, "postgres:") || strings.HasSuffix(pg.Image, ":latest") {
		p.add("postgres", "image %q: want the official postgres with a pinned version", pg.Image)
	}
	checkHealthcheck(p, "postgres", pg)
	prepared := 0
	for _, w := range append(append(words{}, pg.Entrypoint...), pg.Command...) {
		if v, ok := strings.CutPrefix(w, "max_prepared_transactions="); ok {
			prepared, _ = strconv.Atoi(v)
		}
	}
	if billing == nil {
		return
	}
	db := billing.cfg.DB
	if db.URL == "" {
		p.add("billing", "no --db: the replicas write no database")
		return
	}
	u, err := sluicedb.ParseURL(db.URL)
	if err != nil {
		p.add("billing", "--db: %v", err)
		return
	}
	env := pg.Environment
	pw := u.Password
	if pw == "" {
		pw = db.Password
	}
	switch {
	case u.Scheme != "postgres" || u.Host != "postgres" || u.Port != 5432:
		p.add("billing", "--db %s does not reach the postgres service (postgres://...@postgres:5432/...)", u.Redacted())
	case u.User != orDefault(env["POSTGRES_USER"], "postgres"):
		p.add("billing", "--db user %q, the postgres service's is %q", u.User, orDefault(env["POSTGRES_USER"], "postgres"))
	case u.Database != orDefault(env["POSTGRES_DB"], orDefault(env["POSTGRES_USER"], "postgres")):
		p.add("billing", "--db database %q, the postgres service creates %q", u.Database, orDefault(env["POSTGRES_DB"], orDefault(env["POSTGRES_USER"], "postgres")))
	case pw != env["POSTGRES_PASSWORD"]:
		p.add("billing", "the database password (URL or %s) is not the postgres service's POSTGRES_PASSWORD", envName(keyDBPassword))
	}
	if u.Password != "" {
		p.add("billing", "--db holds the password: give it in %s", envName(keyDBPassword))
	}
	if billing.svc.DependsOn["postgres"] != "service_healthy" {
		p.add("billing", "depends on postgres with %q, want service_healthy", billing.svc.DependsOn["postgres"])
	}
	if !db.CreateTables {
		p.add("billing", "no --db-create-tables: nothing else creates bills_accepted and account_totals")
	}
	if db.Mode == examples.DBTwoPhase && prepared <= 0 {
		p.add("postgres", "max_prepared_transactions %d: two-phase mode (billing's --db-mode) needs it above 0", prepared)
	}
}
