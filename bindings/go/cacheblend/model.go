package cacheblend

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// Model is a loaded GGUF model: immutable weights and tokenizer (cbl_model). It is safe for
// concurrent use. Use it with SessionWith (with or without a KV store), or to tokenize text.
type Model struct {
	h *handle
}

func newModel(m *C.cbl_model) *Model {
	model := &Model{h: newHandle(unsafe.Pointer(m), "model",
		func(p unsafe.Pointer) { C.cbl_model_free((*C.cbl_model)(p)) }, nil)}
	runtime.SetFinalizer(model, (*Model).Close)
	return model
}

func loadModel(path string, vocabOnly bool) (*Model, error) {
	const op = "model load"
	var cs cstrings
	defer cs.free()
	var m *C.cbl_model
	var msg *C.char
	if err := callError(op, C.gocbl_model_load(cs.opt(path), C.bool(vocabOnly), &m, &msg), msg); err != nil {
		return nil, err
	}
	return newModel(m), nil
}

// LoadModel loads a GGUF model with its weights. path is a file or a model name such as
// "qwen2.5-coder-1.5b" (its file in the user cache, fetched by cacheblend-fetch-model NAME). An
// empty path loads the default model: $CBL_MODEL, else qwen2.5-coder-1.5b (as
// RuntimeOptions.ModelPath does).
func LoadModel(path string) (*Model, error) { return loadModel(path, false) }

// LoadVocab loads only the tokenizer of a GGUF model (or a vocabulary-only GGUF file); an empty
// path means the default model, as for LoadModel.
func LoadVocab(path string) (*Model, error) { return loadModel(path, true) }

// Close drops this handle's reference; sessions using the model keep it. Idempotent; returns nil.
func (m *Model) Close() error {
	if m != nil {
		m.h.close()
	}
	return nil
}

func (m *Model) acquire(op string) (*C.cbl_model, error) {
	if m == nil {
		return nil, closedError(op, "model")
	}
	p, err := m.h.acquire(op)
	return (*C.cbl_model)(p), err
}

// NVocab returns the vocabulary size (0 once closed).
func (m *Model) NVocab() int {
	p, err := m.acquire("n_vocab")
	if err != nil {
		return 0
	}
	defer m.h.release()
	return int(C.cbl_model_n_vocab(p))
}

// NCtxTrain returns the training context length (0 for vocabulary-only models or once closed).
func (m *Model) NCtxTrain() int {
	p, err := m.acquire("n_ctx_train")
	if err != nil {
		return 0
	}
	defer m.h.release()
	return int(C.cbl_model_n_ctx_train(p))
}

// Tokenize returns the token ids of text. addSpecial adds BOS/EOS as the model's flags say;
// parseSpecial matches control-token text.
func (m *Model) Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error) {
	const op = "tokenize"
	p, err := m.acquire(op)
	if err != nil {
		return nil, err
	}
	defer m.h.release()
	var cs cstrings
	defer cs.free()
	ctext := cs.str(text)
	var n C.size_t
	var msg *C.char
	st := C.gocbl_tokenize(p, ctext, C.size_t(len(text)), C.bool(addSpecial), C.bool(parseSpecial), nil, 0, &n, &msg)
	if err := callError(op, st, msg); err != nil {
		return nil, err
	}
	if n == 0 {
		return []int32{}, nil
	}
	ids := make([]int32, int(n))
	msg = nil
	st = C.gocbl_tokenize(p, ctext, C.size_t(len(text)), C.bool(addSpecial), C.bool(parseSpecial),
		(*C.int32_t)(unsafe.Pointer(&ids[0])), n, &n, &msg)
	if err := callError(op, st, msg); err != nil {
		return nil, err
	}
	return ids[:int(n)], nil
}

// TokenToPiece returns the text of one token (special tokens as their text).
func (m *Model) TokenToPiece(token int32) (string, error) {
	const op = "token to piece"
	p, err := m.acquire(op)
	if err != nil {
		return "", err
	}
	defer m.h.release()
	var n C.size_t
	var msg *C.char
	if err := callError(op, C.gocbl_token_to_piece(p, C.int32_t(token), nil, 0, &n, &msg), msg); err != nil {
		return "", err
	}
	if n == 0 {
		return "", nil
	}
	buf := (*C.char)(C.malloc(n))
	defer C.free(unsafe.Pointer(buf))
	msg = nil
	if err := callError(op, C.gocbl_token_to_piece(p, C.int32_t(token), buf, n, &n, &msg), msg); err != nil {
		return "", err
	}
	return C.GoStringN(buf, C.int(n)), nil
}

// KVStoreOptions configure OpenKVStore. The zero value selects the defaults.
type KVStoreOptions struct {
	BudgetBytes uint64 // size cap (0 = 8 GiB); least recently used chunk KV is evicted past it
	DirectIO    bool   // read with O_DIRECT, bypassing the page cache
}

// KVStore is a chunk-hash KV cache in RAM and on disk (cbl_kvstore), for apps with their own
// retrieval (SessionWith). It is safe for concurrent use, and processes may share its directory.
type KVStore struct {
	h *handle
}

// OpenKVStore opens, creating it (mode 0700) when missing, a chunk KV store in dir. opts may be
// nil.
func OpenKVStore(dir string, opts *KVStoreOptions) (*KVStore, error) {
	const op = "kvstore open"
	if opts == nil {
		opts = &KVStoreOptions{}
	}
	var cs cstrings
	defer cs.free()
	var kv *C.cbl_kvstore
	var msg *C.char
	st := C.gocbl_kvstore_open(cs.str(dir), C.uint64_t(opts.BudgetBytes), C.bool(opts.DirectIO), &kv, &msg)
	if err := callError(op, st, msg); err != nil {
		return nil, err
	}
	store := &KVStore{h: newHandle(unsafe.Pointer(kv), "kvstore",
		func(p unsafe.Pointer) { C.cbl_kvstore_free((*C.cbl_kvstore)(p)) }, nil)}
	runtime.SetFinalizer(store, (*KVStore).Close)
	return store, nil
}

// Close drops this handle's reference; sessions using the store keep it. Idempotent; returns nil.
func (s *KVStore) Close() error {
	if s != nil {
		s.h.close()
	}
	return nil
}
