#version 450
// The image with the heatmap over it, in one pass (one write per pixel instead of an image pass
// and a blended heatmap pass: on a software rasterizer every full-screen pass costs). The
// heatmap is already coloured (the heat texture, built on the CPU when the grid, its range or
// the colour map change: see buildHeatTexture), so a pixel is two filtered fetches and a
// composite with the heatmap opacity. The result is blended over the background like the image.
layout(set = 0, binding = 0) uniform sampler2D image;   // the image layer's set
layout(set = 1, binding = 0) uniform sampler2D heat;    // RGBA8, premultiplied (NaN: 0,0,0,0), linear

// True for the opaque-image pipeline: every image texel has alpha 1, so the composite is a
// plain mix and the pixel is replaced (fewer operations per pixel than the general "over").
layout(constant_id = 0) const bool kOpaqueImage = false;

layout(push_constant) uniform Heatmap {
    layout(offset = 16) float opacity;
} hm;

layout(location = 0) in vec2 uv;
layout(location = 0) out vec4 color;

void main() {
    vec4 img = texture(image, uv);
    vec4 h = texture(heat, uv) * hm.opacity;   // premultiplied: rgb already times coverage
    if (kOpaqueImage) {
        color = vec4(img.rgb * (1.0 - h.a) + h.rgb, 1.0);
        return;
    }
    // Heat over image (straight-alpha result); blended over the background by the pipeline.
    float outA = h.a + img.a * (1.0 - h.a);
    vec3 rgb = outA > 0.0 ? (h.rgb + img.rgb * img.a * (1.0 - h.a)) / outA : vec3(0.0);
    color = vec4(rgb, outA);
}
