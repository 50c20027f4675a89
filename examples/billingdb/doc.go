// Package billingdb opens the database sinks of the billing example
// (examples.BillingWithDB) on PostgreSQL or MySQL/MariaDB from a URL. It is
// apart from package examples so that the database drivers stay out of the
// packages that only build topologies.
package billingdb
