package consent

import (
	"context"
	"errors"
	"sync"

	"github.com/flowd/flowd/internal/cache"
	"github.com/flowd/flowd/internal/database"
	"github.com/flowd/flowd/modules/consent/internal/definitions"
)

// A definition's published version never changes: a new text is a new
// version, and retiring a definition marks the definition, not its
// versions. So the versions flows pinned are kept in memory once read, and
// the consent pages and the person's own page read each from the database
// once per process.

// maxKeptVersions bounds the versions kept.
const maxKeptVersions = 4096

// versionKey names one version of an organization's definition.
type versionKey struct {
	organizationID, definitionID string
	version                      int
}

// keptVersions are the versions read. Those handed out are shared: callers
// read a Version's texts and never change them.
type keptVersions struct {
	kept *cache.Map[versionKey, Version]

	mu sync.Mutex
	// madeIn is the transaction that made an organization's default
	// version 1 and has perhaps not committed: until a read in another
	// transaction finds the version (which then committed), it is not kept.
	madeIn map[versionKey]database.Tx
}

func newKeptVersions() *keptVersions {
	return &keptVersions{kept: cache.New[versionKey, Version](maxKeptVersions), madeIn: map[versionKey]database.Tx{}}
}

func (k *keptVersions) get(key versionKey) (Version, bool) { return k.kept.Get(key) }

// keep keeps v, read in tx (nil: committed); made says that tx made it.
func (k *keptVersions) keep(key versionKey, v Version, tx database.Tx, made bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if made {
		k.madeIn[key] = tx
		return
	}
	if by, ok := k.madeIn[key]; ok {
		if tx != nil && by == tx {
			return
		}
		delete(k.madeIn, key)
	}
	k.kept.Put(key, v)
}

// VersionTx implements Texts. A flow made before definitions existed pins
// the default's version 1, which is made here, in tx, if the organization
// has no default yet.
func (s *DefinitionStore) VersionTx(ctx context.Context, tx database.Tx, organizationID, id string, n int) (Version, error) {
	key := versionKey{organizationID, id, n}
	if v, ok := s.versions.get(key); ok {
		return v, nil
	}
	row, err := definitions.GetVersion(ctx, tx, organizationID, id, n)
	made := false
	if errors.Is(err, database.ErrNotFound) && id == DefaultDefinitionID && n == 1 {
		if err := s.insertDefault(ctx, tx, organizationID); err != nil {
			return Version{}, err
		}
		made = true
		row, err = definitions.GetVersion(ctx, tx, organizationID, id, n)
	}
	if err != nil {
		return Version{}, definitionNotFound(err)
	}
	v := fromRow(row)
	s.versions.keep(key, v, tx, made)
	return v, nil
}

// Version implements Texts: outside any transaction, it reads a version not
// kept yet on its own, and makes a missing default in a transaction of its
// own.
func (s *DefinitionStore) Version(ctx context.Context, organizationID, id string, n int) (Version, error) {
	key := versionKey{organizationID, id, n}
	if v, ok := s.versions.get(key); ok {
		return v, nil
	}
	row, err := definitions.GetVersion(ctx, s.pool, organizationID, id, n)
	if errors.Is(err, database.ErrNotFound) && id == DefaultDefinitionID && n == 1 {
		var v Version
		err := database.WithTx(ctx, s.pool, func(tx database.Tx) (err error) {
			v, err = s.VersionTx(ctx, tx, organizationID, id, n)
			return err
		})
		if err == nil {
			s.versions.keep(key, v, nil, false)
		}
		return v, err
	}
	if err != nil {
		return Version{}, definitionNotFound(err)
	}
	v := fromRow(row)
	s.versions.keep(key, v, nil, false)
	return v, nil
}
