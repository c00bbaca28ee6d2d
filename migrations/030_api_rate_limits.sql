-- Rate limits of API requests per client.
--
-- api_rate_limit is a client's own limit of API requests per minute: null
-- follows the deployment's default (FLOWD_API_RATE_LIMIT), 0 is no limit.
-- external_clients carries it too, for the mapped clients of an external
-- issuer.
alter table api_clients add column api_rate_limit integer
    check (api_rate_limit between 0 and 1000000000);
alter table external_clients add column api_rate_limit integer
    check (api_rate_limit between 0 and 1000000000);

-- api_rate_windows counts each client's API requests in its one-minute
-- windows across instances: every instance counts in memory and writes its
-- own count here about once a second (a row per instance, named by a random
-- id it takes at start), reading every instance's total back. A row is
-- only useful while its window lasts; the identity module deletes old ones.
-- Unlogged: the counts are worth nothing after a crash, and not writing
-- them to the WAL keeps the additions cheap. client_key is the client id,
-- prefixed with "ext:" for clients of an external issuer.
create unlogged table api_rate_windows (
    client_key   text not null,
    window_start timestamptz not null,
    instance     text not null,
    requests     bigint not null,
    primary key (client_key, window_start, instance)
);
