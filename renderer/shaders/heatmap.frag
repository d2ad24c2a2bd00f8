#version 450
// The image with the heatmap over it, in one pass (one write per pixel instead of an image pass
// and a blended heatmap pass: on a software rasterizer every full-screen pass costs): the
// image texel, and a grid of float values stretched over the image, bilinearly interpolated
// between cell centres, mapped through a row of the colour map table and composited over the
// image with the heatmap opacity. The result is blended over the background like the image.
layout(set = 0, binding = 0) uniform sampler2D image;      // the image layer's set
layout(set = 1, binding = 0) uniform sampler2D grid;       // R32_SFLOAT, w x h
layout(set = 1, binding = 1) uniform sampler2D colormaps;  // RGBA8, 256 x rows, nearest

// True when the device filters R32_SFLOAT linearly (the grid's sampler is then linear and
// one texture() call interpolates); else four texelFetch and the interpolation here.
layout(constant_id = 0) const bool kLinearGrid = false;
// True for the opaque-image pipeline: every image texel has alpha 1, so the composite is a
// plain mix and the pixel is replaced (fewer operations per pixel than the general "over").
layout(constant_id = 1) const bool kOpaqueImage = false;

layout(push_constant) uniform Heatmap {
    layout(offset = 16) float vmin;
    float vmax;
    float scale;     // 1 / (vmax - vmin), or 0 when vmax <= vmin (then a step at vmax)
    float opacity;
    float row;       // colour map row in the table
    float rows;      // rows in the table
} hm;

layout(location = 0) in vec2 uv;
layout(location = 0) out vec4 color;

float gridValue() {
    if (kLinearGrid)
        return texture(grid, uv).r;   // clamp-to-edge: the outer half cells are constant
    ivec2 size = textureSize(grid, 0);
    vec2 g = uv * vec2(size) - 0.5;
    vec2 base = floor(g);
    vec2 f = g - base;
    ivec2 lo = clamp(ivec2(base), ivec2(0), size - 1);
    ivec2 hi = clamp(ivec2(base) + 1, ivec2(0), size - 1);
    float v00 = texelFetch(grid, ivec2(lo.x, lo.y), 0).r;
    float v10 = texelFetch(grid, ivec2(hi.x, lo.y), 0).r;
    float v01 = texelFetch(grid, ivec2(lo.x, hi.y), 0).r;
    float v11 = texelFetch(grid, ivec2(hi.x, hi.y), 0).r;
    return mix(mix(v00, v10, f.x), mix(v01, v11, f.x), f.y);
}

void main() {
    vec4 img = texture(image, uv);
    float v = gridValue();
    // NaN values are transparent: the image alone.
    bool nan = isnan(v);
    float a = nan ? 0.0 : hm.opacity;
    float t = hm.scale > 0.0 ? clamp((v - hm.vmin) * hm.scale, 0.0, 1.0) : (v >= hm.vmax ? 1.0 : 0.0);
    if (nan) t = 0.0;
    // Entry i of the table sits at texel centre (i + 0.5) / 256.
    vec2 lut = vec2((t * 255.0 + 0.5) / 256.0, (hm.row + 0.5) / hm.rows);
    vec3 heat = texture(colormaps, lut).rgb;
    if (kOpaqueImage) {
        color = vec4(mix(img.rgb, heat, a), 1.0);
        return;
    }
    // Heat over image (straight alpha "over"); blended over the background by the pipeline.
    float outA = a + img.a * (1.0 - a);
    vec3 rgb = outA > 0.0 ? (heat * a + img.rgb * img.a * (1.0 - a)) / outA : vec3(0.0);
    color = vec4(rgb, outA);
}
