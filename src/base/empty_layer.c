/* Placeholder so that a layer with no sources yet still builds. */
typedef int strata_empty_layer;
