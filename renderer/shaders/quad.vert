#version 450
// A screen-aligned quad covering the image: 4 vertices of a triangle strip, no vertex buffer.
// uv runs 0..1 over the image; the push constant holds the image rectangle in NDC.
layout(push_constant) uniform Quad {
    vec4 rect;   // x0, y0, x1, y1 (Vulkan NDC, y down)
} quad;

layout(location = 0) out vec2 uv;

void main() {
    vec2 corner = vec2(float(gl_VertexIndex & 1), float(gl_VertexIndex >> 1));
    uv = corner;
    gl_Position = vec4(mix(quad.rect.xy, quad.rect.zw, corner), 0.0, 1.0);
}
