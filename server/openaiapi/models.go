package openaiapi

import (
	"net/http"
	"sort"
	"strings"

	"github.com/nbots/nb/server"
)

// modelObject is a model in OpenAI's shape.
type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func toModelObject(m Model) modelObject {
	owner := "nb"
	if m.Cartridge != nil && m.ID != server.DefaultID {
		if a := strings.TrimSpace(m.Cartridge.Meta().Author); a != "" {
			owner = a
		}
	}
	var created int64
	if !m.Modified.IsZero() {
		created = m.Modified.Unix()
	}
	id := m.ID
	if id == server.DefaultID {
		// The built-in default cartridge, listed only when no cartridge
		// is named default: "-" is no name for a model.
		id = DefaultModel
	}
	return modelObject{ID: id, Object: "model", Created: created, OwnedBy: owner}
}

// DefaultModel is the model id of the default cartridge: a cartridge
// named default, else the built-in one ("-" is accepted too).
const DefaultModel = "default"

// cartridgeID is the catalog's id of a request's model.
func cartridgeID(model string) string {
	if strings.EqualFold(model, DefaultModel) {
		return server.DefaultID
	}
	return model
}

// listModels answers GET /v1/models: one model per cartridge the caller
// may use (cartridges that failed to load are left out).
func (h *Handler) listModels(w http.ResponseWriter, r *http.Request) {
	models := h.catalog.Models(r.Context())
	data := make([]modelObject, 0, len(models))
	for _, m := range models {
		if m.Err == nil {
			data = append(data, toModelObject(m))
		}
	}
	server.WriteJSON(w, http.StatusOK, struct {
		Object string        `json:"object"`
		Data   []modelObject `json:"data"`
	}{"list", data})
}

// getModel answers GET /v1/models/{id}.
func (h *Handler) getModel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	models := h.catalog.Models(r.Context())
	want := id
	if want == DefaultModel {
		want = server.DefaultID
	}
	i := sort.Search(len(models), func(i int) bool { return models[i].ID >= want })
	if (i == len(models) || models[i].ID != want) && want != id {
		want = id // a cartridge named default
		i = sort.Search(len(models), func(i int) bool { return models[i].ID >= want })
	}
	if i == len(models) || models[i].ID != want {
		WriteError(w, &Error{Status: http.StatusNotFound, Message: "The model '" + id + "' does not exist or you do not have access to it.", Type: "invalid_request_error", Code: "model_not_found"})
		return
	}
	if err := models[i].Err; err != nil {
		WriteError(w, &Error{Status: http.StatusInternalServerError, Message: "model " + id + " could not be loaded: " + err.Error(), Type: "server_error", Code: "model_not_loaded"})
		return
	}
	server.WriteJSON(w, http.StatusOK, toModelObject(models[i]))
}

func writeBody(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body) //nolint:errcheck // the client may have gone
}
