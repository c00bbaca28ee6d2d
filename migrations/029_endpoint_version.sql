-- Conditional requests: a webhook endpoint's version grows with every change
-- of what the API shows of it (an update, flowd disabling it, its health
-- starting or ending a failure), in the statement that makes the change. Its
-- ETag names the version, and a PATCH or DELETE with If-Match compares it
-- under the row's lock. Existing endpoints start at 1.
alter table webhook_endpoints add column version bigint not null default 1;
