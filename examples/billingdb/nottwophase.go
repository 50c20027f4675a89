//go:build !sluice_chaos_nottwophase

package billingdb

import "github.com/sluice-streams/sluice/examples"

// chaosWrap is the identity: only the negative control of the database
// chaos tests (integration/dbchaos_test.go), built with the tag
// sluice_chaos_nottwophase, replaces the two-phase stores.
func chaosWrap(db *examples.BillingDB) *examples.BillingDB { return db }
