-- An acceptance can be withdrawn, by the organization on the person's
-- behalf; when, the flow keeps.
alter table flows drop constraint flows_consent_status_check;
alter table flows add constraint flows_consent_status_check
    check (consent_status in ('Unopened', 'Opened', 'Rejected', 'Accepted', 'Withdrawn'));
alter table flows add column withdrawn_at timestamptz;
