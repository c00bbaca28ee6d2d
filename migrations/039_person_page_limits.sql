-- The person's own page records each distinct view in the audit log of
-- every organization concerned, once within a window: an entry is added
-- unless the same one (its organization, actor, action, target and detail,
-- which names the sign-in) was added within the window, which this index
-- finds. On Citus audit_log is distributed by now: the change runs on its
-- own, in the DO block.
do $$
begin
    execute 'create index audit_log_recent_idx on audit_log (organization_id, action, target, at)';
end
$$;

-- A person has one open request per organization to be erased: the
-- latest request of their subject there, and whether an erasure followed.
do $$
begin
    execute 'create index erasure_requests_by_subject on erasure_requests (organization_id, subject_key, requested_at desc)';
end
$$;
