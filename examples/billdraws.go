package examples

import (
	"fmt"
	"math/rand/v2"
)

// BillDraws draws the fields of bills for the billing example's input, the
// way both `sluice gen billing` and the chaos tests' generator make them.
type BillDraws struct {
	Rand     *rand.Rand
	Accounts int // at least 1
}

// Account is one of Accounts accounts. A few hot accounts give long running
// totals, where an update applied twice or lost after a crash shifts every
// later total.
func (d BillDraws) Account() string {
	if hot := max(d.Accounts/20, 1); d.Rand.IntN(10) < 3 {
		return fmt.Sprintf("acct-%05d", d.Rand.IntN(hot))
	}
	return fmt.Sprintf("acct-%05d", d.Rand.IntN(d.Accounts))
}

// Amount is never zero (zero is the bad case the totals refuse, and an
// implementation may well treat it as missing). Refunds exercise min_cents
// below zero; amounts beyond 32 bits make a narrowing sum show.
func (d BillDraws) Amount() int64 {
	switch r := d.Rand.IntN(100); {
	case r < 5:
		return -1 - d.Rand.Int64N(20_000)
	case r < 10:
		return 1_000_000 + d.Rand.Int64N(10_000_000_000)
	default:
		return 1 + d.Rand.Int64N(49_999)
	}
}

// Key is the bill's account, its id or nil: billing repartitions the bills
// not keyed by account.
func (d BillDraws) Key(account, billID string) []byte {
	switch r := d.Rand.IntN(10); {
	case r < 4:
		return []byte(account)
	case r < 8:
		return []byte(billID)
	default:
		return nil
	}
}
