package openai

import "net/http"

type storedResponse struct{}

func (h *Handler) createResponse(w http.ResponseWriter, r *http.Request) {}
func (h *Handler) getResponse(w http.ResponseWriter, r *http.Request)    {}
func (h *Handler) deleteResponse(w http.ResponseWriter, r *http.Request) {}
