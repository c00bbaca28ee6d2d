// Package reliability holds flowd's reliability and security suite: tests that
// attack a real flowd process on a real PostgreSQL the way production will —
// kill -9 under load, a database restart, a receiver outage, hostile input,
// forged tokens against every route, personal data at rest, and two instances
// on one database. Each test is bounded in time and stops by itself.
//
// `make test` runs the short variants; `make test-reliability` runs them with
// FLOWD_RELIABILITY_LONG=1 (more load, more kills) plus the fuzz targets.
package reliability
