-- The person's own page finds every flow addressed to one national id, in
-- every organization, without opening every sealed national id: each flow
-- keeps a blind index of its national id, a keyed HMAC of the normalised id
-- under a key of its own, and the version of that key, so that a new key can
-- be rolled out by re-indexing (flowd flows reindex). Rows made before this
-- migration have neither until the re-index has run.
--
-- The index serves "every flow of this person": on Citus, where flows are
-- distributed by organization, the lookup asks every shard, each through its
-- own index. The re-index walks the primary key, (organization_id, id).
do $$
begin
    execute 'alter table flows add column person_index bytea, add column person_index_key text';
    execute 'create index flows_person_index_idx on flows (person_index) where person_index is not null';
end
$$;

-- A definition version may say what withdrawing a consent given under it
-- means for the person, in both languages ({"en": …, "nb": …}); null: the
-- consent pages' plain default.
do $$
begin
    execute 'alter table consent_definition_versions add column withdrawal_consequences jsonb';
end
$$;
