package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// citusPostmasters returns the postmasters of a Citus cluster's coordinator
// (at coordinatorURL) and workers, whose CPU is PostgreSQL's; nil when one
// of them is not on this machine.
func citusPostmasters(ctx context.Context, coordinatorURL string) ([]string, error) {
	conn, err := pgx.Connect(ctx, coordinatorURL)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", redact(coordinatorURL), err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `select nodename, nodeport from pg_dist_node where noderole = 'primary' and groupid <> 0 order by nodeid`)
	if err != nil {
		return nil, fmt.Errorf("the Citus workers (is %s a Citus coordinator?): %w", redact(coordinatorURL), err)
	}
	workers, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var host string
		var port int
		err := r.Scan(&host, &port)
		return net.JoinHostPort(host, strconv.Itoa(port)), err
	})
	if err != nil {
		return nil, err
	}
	if len(workers) == 0 {
		return nil, fmt.Errorf("%s has no Citus workers", redact(coordinatorURL))
	}
	urls := []string{coordinatorURL}
	for _, w := range workers {
		u, err := url.Parse(coordinatorURL)
		if err != nil {
			return nil, err
		}
		u.Host = w
		urls = append(urls, u.String())
	}
	var postmasters []string
	for _, u := range urls {
		c, err := pgx.Connect(ctx, u)
		if err != nil {
			return nil, fmt.Errorf("connect to %s: %w", redact(u), err)
		}
		var backend int
		err = c.QueryRow(ctx, "select pg_backend_pid()").Scan(&backend)
		c.Close(ctx)
		if err != nil {
			return nil, err
		}
		pm := postmasterOf(strconv.Itoa(backend))
		if pm == "" {
			return nil, nil
		}
		postmasters = append(postmasters, pm)
	}
	return postmasters, nil
}

// placement is where an organization's rows live on Citus: the shard of
// flows its id hashes to (its co-located shards sit beside it) and the
// worker that holds it.
type placement struct {
	shard int64
	host  string
	port  int
}

func (p placement) String() string { return net.JoinHostPort(p.host, strconv.Itoa(p.port)) }

// spreadOrgs puts the organization that creates and the one whose flows
// are read on different workers, as a deployment's tenants are, moving the
// reads' organization when the hash put the two together, and notes where
// each organization lives.
func (b *bench) spreadOrgs(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, b.dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	place := func(o org) (placement, error) {
		var p placement
		err := conn.QueryRow(ctx, `select shardid, nodename, nodeport from citus_shards
			where table_name = 'flows'::regclass and shardid = get_shard_id_for_distribution_column('flows', $1::text)`, o.ID).
			Scan(&p.shard, &p.host, &p.port)
		return p, err
	}
	creates, err := place(b.main)
	if err != nil {
		return fmt.Errorf("where %s lives: %w", b.main.Prefix, err)
	}
	reads, err := place(b.deep)
	if err != nil {
		return fmt.Errorf("where %s lives: %w", b.deep.Prefix, err)
	}
	if reads.String() == creates.String() {
		if reads.shard == creates.shard {
			// One shard holds both: the reads' organization gets one of
			// its own (with its co-located tables' shards) to move.
			if err := conn.QueryRow(ctx, `select isolate_tenant_to_new_shard('flows', $1::text, 'CASCADE', shard_transfer_mode => 'block_writes')`,
				b.deep.ID).Scan(&reads.shard); err != nil {
				return fmt.Errorf("isolate %s: %w", b.deep.Prefix, err)
			}
		}
		var to placement
		if err := conn.QueryRow(ctx, `select nodename, nodeport from pg_dist_node
			where noderole = 'primary' and groupid <> 0 and (nodename, nodeport) <> ($1, $2) order by nodeid limit 1`,
			reads.host, reads.port).Scan(&to.host, &to.port); err != nil {
			return fmt.Errorf("another worker for %s: %w", b.deep.Prefix, err)
		}
		if _, err := conn.Exec(ctx, `select citus_move_shard_placement($1, $2, $3, $4, $5, shard_transfer_mode => 'block_writes')`,
			reads.shard, reads.host, reads.port, to.host, to.port); err != nil {
			return fmt.Errorf("move %s to %s: %w", b.deep.Prefix, to, err)
		}
		b.note("citus: moved %s's shards from %s to %s, away from %s's", b.deep.Prefix, reads, to, b.main.Prefix)
		if reads, err = place(b.deep); err != nil {
			return err
		}
	}
	writes, err := place(b.writes)
	if err != nil {
		return fmt.Errorf("where %s lives: %w", b.writes.Prefix, err)
	}
	b.note("citus: the creating organization %s lives on worker %s, the read one %s on %s, pgbench's writes %s on %s",
		b.main.Prefix, creates, b.deep.Prefix, reads, b.writes.Prefix, writes)
	return nil
}
