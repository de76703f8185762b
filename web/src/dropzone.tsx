import { useState } from 'preact/hooks';

/**
 * A drop target with a real file input inside: drag and drop for the mouse, the input (a labelled,
 * focusable control that opens the system picker with Enter or Space) for everyone.
 */
export function DropZone(props: { id: string; label: string; hint: string; multiple?: boolean; disabled?: boolean; onFiles: (files: File[]) => void }) {
  const [over, setOver] = useState(false);
  const multiple = props.multiple ?? true;
  return (
    // biome-ignore lint/a11y/noStaticElementInteractions: dropping is the mouse's way in; the file input inside is everyone's.
    <div
      class={`dropzone${over ? ' over' : ''}${props.disabled ? ' disabled' : ''}`}
      onDragOver={(e) => {
        e.preventDefault();
        if (!props.disabled) setOver(true);
      }}
      onDragLeave={() => setOver(false)}
      onDrop={(e) => {
        e.preventDefault();
        setOver(false);
        if (props.disabled) return;
        const files = [...(e.dataTransfer?.files ?? [])];
        if (files.length) props.onFiles(files);
      }}
    >
      <p>{props.hint}</p>
      <input
        type="file"
        id={props.id}
        class="file-input"
        multiple={multiple}
        accept="image/jpeg,image/png,image/webp,.jpg,.jpeg,.png,.webp"
        disabled={props.disabled}
        onChange={(e) => {
          const input = e.currentTarget;
          const files = [...(input.files ?? [])];
          input.value = ''; // choosing the same files again fires change again
          if (files.length) props.onFiles(files);
        }}
      />
      <label for={props.id} class="button">
        {props.label}…
      </label>
    </div>
  );
}
